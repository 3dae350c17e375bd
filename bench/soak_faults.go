package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// faultKind names one kind of fault the soak injects.
type faultKind string

const (
	// faultWorkerKill kills the worker process (SIGKILL) and starts a new one a few seconds later.
	faultWorkerKill faultKind = "worker-kill"
	// faultTemporalRestart restarts the Temporal server on its database file.
	faultTemporalRestart faultKind = "temporal-restart"
	// faultAPIServerPause hangs kube-apiserver (SIGSTOP), then lets it go on.
	faultAPIServerPause faultKind = "apiserver-pause"
	// faultGitHub5xx makes GitHub answer every REST call with a server error.
	faultGitHub5xx faultKind = "github-5xx"
	// faultActions5xx makes the Actions service (scale sets, their sessions, messages and
	// runners) answer every call with a server error; REST is not affected.
	faultActions5xx faultKind = "actions-5xx"
	// faultSessionExpiry has the Actions service end every scale set's message session at
	// once, as it ends one it takes for abandoned: each listener finds its session gone.
	faultSessionExpiry faultKind = "session-expiry"
	// faultReassignment has the Actions service take back the jobs no runner of their set
	// took in time and assign them again, while the scale-set pools hold their runners back.
	faultReassignment faultKind = "reassignment"
	// faultRollingDeploy starts a second worker process and then stops the first gracefully
	// (SIGTERM), as a Deployment's rolling update does.
	faultRollingDeploy faultKind = "rolling-deploy"
)

// The faults' lengths, drawn per fault within these bounds (the "a few seconds",
// "about 20 s", "10–20 s", "about 15 s").
const (
	workerDownMin, workerDownMax = 3 * time.Second, 8 * time.Second
	temporalDown                 = 20 * time.Second
	apiPauseMin, apiPauseMax     = 10 * time.Second, 20 * time.Second
	github5xxMin, github5xxMax   = 12 * time.Second, 18 * time.Second
	// The Actions service's outages: long enough that a listener's poll and runners' JIT
	// configurations fail and are retried (the scale-set integration test holds one for 60 s).
	actions5xxMin, actions5xxMax = 15 * time.Second, 30 * time.Second
	// The reassignment window: the service takes jobs back for this long.
	reassignWindowMin, reassignWindowMax = 20 * time.Second, 30 * time.Second
	// faultsPerTenMinutes is how many worker kills, API-server pauses, GitHub outages and
	// Actions service outages a ten-minute soak gets of each kind (at least one each in a
	// shorter soak); the Temporal server is restarted, the sessions expired, jobs reassigned
	// and the worker deployed once whatever the length.
	faultsPerTenMinutes = 3
)

// faultOverhead is what a fault takes beyond its outage: a Temporal restart's shutdown and
// start, a new worker's start until it polls. The plan leaves room for it.
var faultOverhead = map[faultKind]time.Duration{
	faultWorkerKill:      10 * time.Second,
	faultTemporalRestart: 20 * time.Second,
	// Until the listeners poll through new sessions.
	faultSessionExpiry: 15 * time.Second,
	// Waiting for the sets' waiting jobs to be young enough (reassign).
	faultReassignment: 5 * time.Second,
	// The new worker's start, the old one's graceful stop.
	faultRollingDeploy: 25 * time.Second,
}

// plannedFault is one fault of the plan: what, when (from the first job's queueing), for how
// long, and for GitHub which server error.
type plannedFault struct {
	Kind   faultKind
	At     time.Duration
	For    time.Duration
	Status int
}

// planFaults draws the soak's faults from the seed: their order, lengths and the gaps between
// them, one after another within the queueing window (after its first tenth, so the pools are
// busy when the first fault comes). The same seed and duration give the same plan. Faults
// never overlap: each starts after the one before it has ended.
func planFaults(seed int64, d time.Duration) []plannedFault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x50a1c))
	each := max(1, int(math.Round(faultsPerTenMinutes*d.Minutes()/10)))
	kinds := []faultKind{faultTemporalRestart, faultSessionExpiry, faultReassignment, faultRollingDeploy}
	for range each {
		kinds = append(kinds, faultWorkerKill, faultAPIServerPause, faultGitHub5xx, faultActions5xx)
	}
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	plan := make([]plannedFault, len(kinds))
	var spans time.Duration
	for i, k := range kinds {
		plan[i] = drawFault(r, k)
		spans += plan[i].For + faultOverhead[k]
	}
	start := d / 10
	free := max(d-start-spans, 0)
	// Random gaps: one before each fault and one after the last, sharing the free time.
	weights := make([]float64, len(plan)+1)
	var sum float64
	for i := range weights {
		weights[i] = r.Float64() + 0.1
		sum += weights[i]
	}
	at := start
	for i := range plan {
		at += time.Duration(float64(free) * weights[i] / sum).Round(100 * time.Millisecond)
		plan[i].At = at
		at += plan[i].For + faultOverhead[plan[i].Kind]
	}
	return plan
}

// drawFault draws one fault's length (and GitHub's answer).
func drawFault(r *rand.Rand, k faultKind) plannedFault {
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)/int64(time.Second)+1))*time.Second
	}
	f := plannedFault{Kind: k}
	switch k {
	case faultWorkerKill:
		f.For = between(workerDownMin, workerDownMax)
	case faultTemporalRestart:
		f.For = temporalDown
	case faultAPIServerPause:
		f.For = between(apiPauseMin, apiPauseMax)
	case faultGitHub5xx:
		f.For = between(github5xxMin, github5xxMax)
		f.Status = []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[r.IntN(3)]
	case faultActions5xx:
		f.For = between(actions5xxMin, actions5xxMax)
		f.Status = []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[r.IntN(3)]
	case faultReassignment:
		f.For = between(reassignWindowMin, reassignWindowMax)
	}
	return f
}

// runFaults injects the plan's faults one after another, each at its time from began (at once
// when the one before it ran late), and returns what happened. A fault that cannot be
// injected or undone ends the phase: the world is no longer what the soak measures.
func (s *soakPhase) runFaults(ctx context.Context, plan []plannedFault, began time.Time) ([]SoakFault, error) {
	var done []SoakFault
	for _, f := range plan {
		select {
		case <-ctx.Done():
			return done, ctx.Err()
		case <-time.After(time.Until(began.Add(f.At))):
		}
		start := time.Now()
		what := describeFault(f)
		if f.For > 0 {
			what += " for " + f.For.String()
		}
		s.e.say("soak: %s (%d jobs queued so far)", what, s.queuedSoFar())
		rec := SoakFault{Kind: string(f.Kind), AtSeconds: round1(start.Sub(began).Seconds()), OutageSeconds: f.For.Seconds(), Status: f.Status}
		if err := s.inject(ctx, f, &rec); err != nil {
			return done, fmt.Errorf("%s: %w", f.Kind, err)
		}
		if err := s.keepWorker(ctx); err != nil {
			return done, err
		}
		end := time.Now()
		s.faultsOver = end
		rec.Seconds = round1(end.Sub(start).Seconds())
		done = append(done, rec)
		s.e.say("soak: %s over after %.1fs", f.Kind, end.Sub(start).Seconds())
	}
	return done, nil
}

func describeFault(f plannedFault) string {
	switch f.Kind {
	case faultWorkerKill:
		return "killing the worker (SIGKILL), none running"
	case faultTemporalRestart:
		return "restarting the Temporal server, down"
	case faultAPIServerPause:
		return "pausing kube-apiserver (SIGSTOP)"
	case faultActions5xx:
		return fmt.Sprintf("the Actions service answering %d to every call", f.Status)
	case faultSessionExpiry:
		return "the Actions service ending every scale set's message session"
	case faultReassignment:
		return fmt.Sprintf("the Actions service reassigning the jobs no runner took within %s (the scale-set pools paused for the first %s)", reassignLapse, reassignHold)
	case faultRollingDeploy:
		return "a rolling deploy: a second worker started, then the first stopped (SIGTERM)"
	default:
		return fmt.Sprintf("GitHub answering %d to every REST call", f.Status)
	}
}

// inject breaks one part of the world for the fault's length and mends it, noting in rec what
// a scale-set fault did.
func (s *soakPhase) inject(ctx context.Context, f plannedFault, rec *SoakFault) error {
	w := s.e.world
	switch f.Kind {
	case faultWorkerKill:
		s.leavingWorker()
		s.worker.kill()
		s.worker = nil
		if err := sleep(ctx, f.For); err != nil {
			return err
		}
		return s.startWorker(ctx)
	case faultTemporalRestart:
		return w.Temporal.Restart(ctx, f.For)
	case faultAPIServerPause:
		if err := w.Kube.PauseAPIServer(); err != nil {
			return err
		}
		slept := sleep(ctx, f.For)
		if err := w.Kube.ResumeAPIServer(); err != nil {
			return err
		}
		return slept
	case faultGitHub5xx:
		w.GitHub.StartOutage(githubdouble.Outage{Status: f.Status})
		defer w.GitHub.EndOutage()
		return sleep(ctx, f.For)
	case faultActions5xx:
		w.GitHub.StartActionsServiceOutage(f.Status)
		defer w.GitHub.EndActionsServiceOutage()
		return sleep(ctx, f.For)
	case faultSessionExpiry:
		return s.expireSessions(ctx, rec)
	case faultReassignment:
		return s.reassign(ctx, f.For, rec)
	case faultRollingDeploy:
		return s.rollingDeploy(ctx, rec)
	}
	return fmt.Errorf("unknown fault %q", f.Kind)
}

// sleep waits d, or less when ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
