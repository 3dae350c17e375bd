package main

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/runnerflow/runnerflow/internal/poolcli"
)

// OperatorResult is what an operator feels during a burst (issue 37): how long `starter get`
// (the pool's status query) takes while the pool decides for hundreds of runners, and how many
// of GitHub's deliveries the intake answered 503 (each redelivered later by the reconcile).
// The pool's decision latency is figure 1's first row (LatencyResult.ToPoolDecision).
type OperatorResult struct {
	// StatusQuery is the status query's round trip, each pool asked once a second from the
	// first webhook to the last job started; a query that failed counts with its duration.
	StatusQuery         Percentiles `json:"statusQuery"`
	StatusQueryFailures int         `json:"statusQueryFailures"`
	// Deliveries are the webhook deliveries the intake answered in the same span, and
	// Answered503 those it refused because Temporal did not confirm them in time.
	Deliveries  int `json:"deliveries"`
	Answered503 int `json:"answered503"`
	// PoolTasks, WindowTasks and ListenerTasks trace where the pools', the scale windows' and
	// a scale-set burst's listeners' time went in the same span (DeciderTrace): the decision
	// latency's parts.
	PoolTasks     DeciderTrace `json:"poolTasks"`
	WindowTasks   DeciderTrace `json:"windowTasks"`
	ListenerTasks DeciderTrace `json:"listenerTasks"`
	// PodPath traces the runners' way from their pod's creation to its start (PodPathTrace).
	PodPath PodPathTrace `json:"podPath"`
}

// statusProbe asks every pool's status once a second until stopped, timing each answer.
type statusProbe struct {
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu        sync.Mutex
	durations []time.Duration
	failures  int
}

// probeStatus starts asking; stop ends it and returns what it measured.
func (e *env) probeStatus(ctx context.Context, pools []string) *statusProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &statusProbe{cancel: cancel}
	for _, pool := range pools {
		p.done.Add(1)
		go func() {
			defer p.done.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				asked := time.Now()
				_, err := poolcli.Status(ctx, e.c, pool)
				if ctx.Err() != nil {
					return // the burst ended mid-query: not a measurement
				}
				p.note(time.Since(asked), err != nil)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	return p
}

func (p *statusProbe) note(d time.Duration, failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.durations = append(p.durations, d)
	if failed {
		p.failures++
	}
}

// stop ends the probe and summarizes it.
func (p *statusProbe) stop() (Percentiles, int) {
	p.cancel()
	p.done.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return summarize(p.durations), p.failures
}

// answerCounter counts the intake's answers by HTTP status.
type answerCounter struct {
	mu     sync.Mutex
	counts map[int]int
}

func (a *answerCounter) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts = map[int]int{}
}

// total and of report all answers and those with one status since the last reset.
func (a *answerCounter) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.counts {
		n += c
	}
	return n
}

func (a *answerCounter) of(status int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[status]
}

func (a *answerCounter) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		a.mu.Lock()
		if a.counts == nil {
			a.counts = map[int]int{}
		}
		a.counts[sw.status]++
		a.mu.Unlock()
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
