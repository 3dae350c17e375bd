package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/workflows"
)

// signalGate is the intake's Temporal with its scale-window signals under the test's control.
// It passes them to the real server and records the batches the server accepted; it holds the
// first signal until the test releases it, so deliveries queue behind a signal in flight as
// they do under load; and it can answer chosen signals with an error instead of sending them.
type signalGate struct {
	client.Client
	// release lets the first signal go on; until then it is held, even past its deadline (a
	// stuck call), so the deliveries behind it meet theirs while it is in flight.
	release     chan struct{}
	releaseOnce sync.Once
	// arrived receives each signal's number (from 1) as the intake makes it.
	arrived chan int

	mu      sync.Mutex
	calls   int
	failAt  map[int]error
	batches [][]workflows.WorkflowJobEvent
}

func newSignalGate() *signalGate {
	return &signalGate{Client: tc, release: make(chan struct{}), arrived: make(chan int, 10_000), failAt: map[int]error{}}
}

func (g *signalGate) SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
	options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error) {
	g.mu.Lock()
	g.calls++
	n, fail := g.calls, g.failAt[g.calls]
	g.mu.Unlock()
	g.arrived <- n
	if n == 1 {
		<-g.release
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fail != nil {
		return nil, fail
	}
	run, err := g.Client.SignalWithStartWorkflow(ctx, workflowID, signalName, signalArg, options, workflow, workflowArgs...)
	if err == nil {
		g.mu.Lock()
		g.batches = append(g.batches, signalArg.(workflows.WorkflowJobsSignal).Events)
		g.mu.Unlock()
	}
	return run, err
}

// releaseFirst lets the held first signal go on.
func (g *signalGate) releaseFirst() { g.releaseOnce.Do(func() { close(g.release) }) }

// signalled is how many window signals the intake made, and the batch sizes the server took.
func (g *signalGate) signalled() (calls int, sizes []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range g.batches {
		sizes = append(sizes, len(b))
	}
	return g.calls, sizes
}

// waitingJobs lists the jobs queued for the pool's window, in queue order, and whether a
// sender is at work for it.
func (h *Handler) waitingJobs(pool string) (jobs []int64, busy bool) {
	events, busy := h.windows.Waiting(pool)
	for _, ev := range events {
		jobs = append(jobs, ev.JobID)
	}
	return jobs, busy
}

// commitTest is an intake with one organization pool whose window signals pass a signalGate.
type commitTest struct {
	t         *testing.T
	h         *Handler
	gate      *signalGate
	metrics   *Metrics
	org, pool string
}

// newCommitTest gives every delivery timeout to be answered in (the handler's budget), and a
// window's signal hold from its oldest event's arrival (zero: the policy's).
func newCommitTest(t *testing.T, timeout, hold time.Duration) *commitTest {
	t.Helper()
	ct := &commitTest{t: t, gate: newSignalGate(), metrics: NewMetrics(prometheus.NewRegistry()),
		org: unique("commit-org-"), pool: unique("commit-pool-")}
	startPool(t, orgPool(ct.pool, ct.org, "", "linux"))
	t.Cleanup(func() {
		ct.gate.releaseFirst()
		_ = tc.TerminateWorkflow(context.Background(), workflows.ScaleWindowWorkflowID(ct.pool), "", "test over")
	})
	var err error
	ct.h, err = NewHandler(Config{Secret: []byte(testSecret), Temporal: ct.gate, Metrics: ct.metrics, Timeout: timeout, WindowSignalTimeout: hold})
	if err != nil {
		t.Fatal(err)
	}
	waitForPools(t, ct.h.Pools(), ct.pool)
	return ct
}

// deliver serves a queued workflow_job delivery for the job in its own goroutine; its answer's
// status comes on the channel.
func (ct *commitTest) deliver(job int64) <-chan int {
	body := fmt.Appendf(nil, `{"action":"queued","workflow_job":{"id":%d,"run_id":1,"status":"queued","labels":["self-hosted","linux"]},`+
		`"repository":{"full_name":"%s/app","owner":{"login":"%s","type":"Organization"}}}`, job, ct.org, ct.org)
	answer := make(chan int, 1)
	go func() { answer <- serve(ct.h, delivery("workflow_job", fmt.Sprintf("%s-%d", ct.pool, job), body)).Code }()
	return answer
}

// holdFirstSignal delivers the job and returns once its signal is in flight, held.
func (ct *commitTest) holdFirstSignal(job int64) <-chan int {
	answer := ct.deliver(job)
	if n := <-ct.gate.arrived; n != 1 {
		ct.t.Fatalf("signal %d arrived first", n)
	}
	return answer
}

// queueBehind delivers the jobs while the first signal is held and returns once all of them
// wait in the window's queue, with the queue's order.
func (ct *commitTest) queueBehind(jobs []int64) (answers []<-chan int, order []int64) {
	ct.t.Helper()
	for _, j := range jobs {
		answers = append(answers, ct.deliver(j))
	}
	ct.eventually(fmt.Sprintf("%d deliveries queued", len(jobs)), func() bool {
		order, _ = ct.h.waitingJobs(ct.pool)
		return len(order) == len(jobs)
	})
	return answers, order
}

// waitIdle waits until the group commit has nothing queued or in flight for the pool.
func (ct *commitTest) waitIdle() {
	ct.t.Helper()
	ct.eventually("the window's sender to finish", func() bool {
		jobs, busy := ct.h.waitingJobs(ct.pool)
		return len(jobs) == 0 && !busy
	})
}

func (ct *commitTest) eventually(what string, cond func() bool) {
	ct.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			ct.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statuses collects the answers, by status.
func statuses(answers []<-chan int) map[int]int {
	out := map[int]int{}
	for _, a := range answers {
		out[<-a]++
	}
	return out
}

func jobRange(first, n int64) []int64 {
	var jobs []int64
	for j := first; j < first+n; j++ {
		jobs = append(jobs, j)
	}
	return jobs
}

func windowJobs(t *testing.T, pool string) []int64 {
	var jobs []int64
	for _, ev := range windowEvents(t, pool) {
		jobs = append(jobs, ev.JobID)
	}
	return jobs
}

// TestConcurrentDeliveriesShareSignals: deliveries that arrive while a signal to their window is
// in flight go together in the next signals, at most a signal's bound each, in the order they
// arrived; each is acknowledged once its signal was accepted, and the window's history holds
// every acknowledged event exactly once.
func TestConcurrentDeliveriesShareSignals(t *testing.T) {
	ct := newCommitTest(t, time.Minute, 0) // generous: 1100 deliveries queue under -race
	first := ct.holdFirstSignal(1)
	queued := int64(2*workflows.WorkflowJobsSignalMaxEvents + 100)
	answers, order := ct.queueBehind(jobRange(2, queued))
	ct.gate.releaseFirst()

	got := statuses(append(answers, first))
	if got[http.StatusAccepted] != int(queued)+1 {
		t.Fatalf("answers by status %v, want all %d accepted", got, queued+1)
	}
	calls, sizes := ct.gate.signalled()
	bound := workflows.WorkflowJobsSignalMaxEvents
	if calls != 4 || !slices.Equal(sizes, []int{1, bound, bound, 100}) {
		t.Errorf("%d signals (the first carrying %v events) for %d deliveries, want the held one and then batches of at most %d",
			calls, sizes[:min(len(sizes), 6)], queued+1, bound)
	}
	if want := append([]int64{1}, order...); !slices.Equal(windowJobs(t, ct.pool), want) {
		t.Errorf("the window's events are not every acknowledged event once, in arrival order")
	}
	if n, sum := histogram(t, ct.metrics, "sent"); n != 4 || sum != float64(queued+1) {
		t.Errorf("window signal histogram: %v signals carrying %v events, want 4 carrying %d", n, sum, queued+1)
	}
}

// TestFailedSignalAnswersEveryDeliveryItCarried: when Temporal refuses the signal carrying a
// batch, every delivery of the batch is answered as a failed signal is (503 when Temporal is
// unavailable, 500 otherwise) and none of its events reached the window; the window's later
// deliveries are signalled as usual.
func TestFailedSignalAnswersEveryDeliveryItCarried(t *testing.T) {
	ct := newCommitTest(t, time.Minute, 0)
	ct.gate.failAt[2] = serviceerror.NewUnavailable("frontend restarting")
	ct.gate.failAt[3] = serviceerror.NewInvalidArgument("refused")
	first := ct.holdFirstSignal(1)
	answers, _ := ct.queueBehind(jobRange(2, 50))
	ct.gate.releaseFirst()

	if got := <-first; got != http.StatusAccepted {
		t.Errorf("the held delivery was answered %d, want 202", got)
	}
	if got := statuses(answers); got[http.StatusServiceUnavailable] != 50 {
		t.Errorf("the failed batch's deliveries were answered %v, want all 50 with 503", got)
	}
	ct.waitIdle()
	if got := <-ct.deliver(100); got != http.StatusInternalServerError {
		t.Errorf("a delivery whose signal Temporal refused was answered %d, want 500", got)
	}
	if got := <-ct.deliver(101); got != http.StatusAccepted {
		t.Errorf("a delivery after the failures was answered %d, want 202", got)
	}
	if got := windowJobs(t, ct.pool); !slices.Equal(got, []int64{1, 101}) {
		t.Errorf("the window got jobs %v, want only the acknowledged [1 101]", got)
	}
	if got := testutil.ToFloat64(ct.metrics.Events("workflow_job", OutcomeUnavailable)); got != 50 {
		t.Errorf("counted %v unavailable deliveries, want 50", got)
	}
	if n, sum := histogram(t, ct.metrics, "error"); n != 2 || sum != 51 {
		t.Errorf("failed window signals: %v carrying %v events, want 2 carrying 51", n, sum)
	}
}

// TestDeliveryRefusedInTimeStillReachesItsWindow: deliveries whose time runs out while their
// signal is held (a slow Temporal) are answered 503 at their deadline, and their events are
// still signalled, in order, once Temporal takes signals again: the pool hears of the jobs
// without waiting for GitHub's redelivery.
func TestDeliveryRefusedInTimeStillReachesItsWindow(t *testing.T) {
	ct := newCommitTest(t, 2*time.Second, time.Minute)
	first := ct.holdFirstSignal(1)
	answers, order := ct.queueBehind(jobRange(2, 20))
	start := time.Now()
	if got := statuses(append(answers, first)); got[http.StatusServiceUnavailable] != 21 {
		t.Fatalf("answers by status %v, want all 21 answered 503 at their deadline", got)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the deliveries were answered %v after queueing; their budget was 2 s", waited)
	}
	if jobs, busy := ct.h.waitingJobs(ct.pool); len(jobs) != 20 || !busy {
		t.Errorf("after their deliveries were refused, jobs %v wait for the held signal (sender at work: %v), want all 20", jobs, busy)
	}
	ct.gate.releaseFirst()
	ct.waitIdle()
	if calls, sizes := ct.gate.signalled(); calls != 2 || !slices.Equal(sizes, []int{1, 20}) {
		t.Errorf("%d signals (accepted batches %v), want the held one and one for the 20 behind it", calls, sizes)
	}
	if want := append([]int64{1}, order...); !slices.Equal(windowJobs(t, ct.pool), want) {
		t.Errorf("the window got jobs %v, want every refused delivery's event once, in arrival order %v", windowJobs(t, ct.pool), want)
	}
}

// TestEventHeldPastTheSignalTimeoutIsDropped: a signal held past its own deadline fails, and
// the events that waited behind it as long leave the queue unsent (their deliveries were
// refused; GitHub's redelivery carries them), so an outage cannot grow the queue for ever;
// the window's next delivery is signalled as usual.
func TestEventHeldPastTheSignalTimeoutIsDropped(t *testing.T) {
	const hold = 2 * time.Second
	ct := newCommitTest(t, time.Second, hold)
	first := ct.holdFirstSignal(1)
	answers, _ := ct.queueBehind(jobRange(2, 20))
	if got := statuses(append(answers, first)); got[http.StatusServiceUnavailable] != 21 {
		t.Fatalf("answers by status %v, want all 21 answered 503 at their deadline", got)
	}
	time.Sleep(hold) // the held signal's deadline passes while it is stuck
	ct.gate.releaseFirst()
	ct.waitIdle()
	if got := <-ct.deliver(100); got != http.StatusAccepted {
		t.Fatalf("a delivery after the stuck signal was answered %d, want 202", got)
	}
	if calls, sizes := ct.gate.signalled(); calls != 2 || !slices.Equal(sizes, []int{1}) {
		t.Errorf("%d signals (accepted batches %v), want the stuck one and one for the later delivery", calls, sizes)
	}
	if got := windowJobs(t, ct.pool); !slices.Equal(got, []int64{100}) {
		t.Errorf("the window got jobs %v, want only [100]", got)
	}
}

// histogram returns the window signal histogram's count and sum for a result.
func histogram(t *testing.T, m *Metrics, result string) (count uint64, sum float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.windowSignals)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if s.GetLabel()[0].GetValue() == result {
				return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}
