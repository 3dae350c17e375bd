package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// poolRun is one run of a pool workflow. Only st is carried across continue-as-new; the rest
// is this run's bookkeeping.
type poolRun struct {
	ctx    workflow.Context
	st     PoolState
	logger log.Logger
	// canAfter and iterations implement PoolInput.ContinueAsNewAfter, listenerCANAfter
	// PoolInput.ListenerContinueAsNewAfter.
	canAfter         int
	iterations       int
	listenerCANAfter int
	// changed is set by every handler and completion; the loop waits for it.
	changed bool
	// inflight counts child starts and signals to runners not yet acknowledged; listing is
	// true while a runner listing runs, checking while a runner workflow check runs,
	// jobChecking while reserved jobs are read at GitHub. Continue-as-new waits for all four.
	inflight    int
	listing     bool
	checking    bool
	jobChecking bool
	// warmBusy names the warm registrations with a call under way; warmWake is when the next
	// one is due for refresh.
	warmBusy []string
	warmWake time.Time
	// warmApart is changeWarmApart's gate (asked by tendWarm); warmSpentBusy is true while
	// spent warm Secrets are being removed.
	warmApart     bool
	warmSpentBusy bool
	// plan is the last decision, for QueryStatus.
	plan Plan
	// drainers receive what is left in the signal channels before continue-as-new.
	drainers []func() bool
	// lean is changeLeanRunners' gate, read once per run.
	lean bool
	// timer is the pending wake-up kept across iterations (changeLeanRunners).
	timer *poolTimer
	// prewarm is this run's side of prewarming (pool_prewarm.go).
	prewarm poolPrewarm
	// demand is where the pool learns what its runners are needed for beyond its reservations
	// (pool_demand.go), chosen from the spec when the run starts.
	demand demandSource
}

// bounds are the min, max and minIdle in force at now.
func (p *poolRun) bounds(now time.Time) Bounds {
	b, _, _ := effectiveBounds(p.st.Spec, p.st.Scale, now)
	return b
}

// runnersByState counts the pool's runners by state, for the status and the metrics.
func (p *poolRun) runnersByState() map[RunnerState]int {
	counts := map[RunnerState]int{}
	for _, r := range p.st.Runners {
		counts[r.State]++
	}
	return counts
}

// find is the index of the named runner in the pool's state; -1 when the pool does not track it.
func (p *poolRun) find(name string) int {
	return slices.IndexFunc(p.st.Runners, func(r PoolRunner) bool { return r.Name == name })
}

// receive installs the receiver of one signal: a coroutine hands each signal to handle and marks
// the pool changed, and a drainer does the same for what is still queued at continue-as-new.
func receive[T any](p *poolRun, name string, handle func(T)) {
	ch := workflow.GetSignalChannel(p.ctx, name)
	p.drainers = append(p.drainers, func() bool {
		var v T
		if !ch.ReceiveAsync(&v) {
			return false
		}
		handle(v)
		p.changed = true
		return true
	})
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		for {
			var v T
			// A payload that does not decode is dropped (and logged) by the SDK.
			ch.Receive(ctx, &v)
			handle(v)
			p.changed = true
		}
	})
}

// poolTimer is the pool's one pending wake-up.
type poolTimer struct {
	at     time.Time
	fired  bool
	cancel workflow.CancelFunc
}

// soonest is the earliest of the times that are set (not zero); zero when none is.
func soonest(times ...time.Time) time.Time {
	var next time.Time
	for _, t := range times {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}
