package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// MetricJobsWaiting is the gauge of a pool's queued jobs without a runner, by the cause the
// pool sees from its own state (WaitingByCause). `starter why` names finer causes (GitHub's
// budget or pace, the pod's own reason, an unreachable cluster) that need reads the pool does
// not make; here they count as the runner they wait for: starting or not online.
const MetricJobsWaiting = "runnerflow_jobs_waiting"

// The values of runnerflow_jobs_waiting's cause label; each is also a `starter why` cause.
const (
	WaitPaused     = "pool-paused"
	WaitQuota      = "quota"
	WaitStarting   = "runner-starting"
	WaitNotOnline  = "runner-not-online"
	WaitUnassigned = "not-yet-assigned"
	WaitAtMax      = "pool-at-max"
	WaitOverride   = "scheduled-override"
	WaitDeciding   = "pool-deciding"
)

// WaitCauses are the cause label's bounded values, in the order they are published.
var WaitCauses = []string{WaitPaused, WaitQuota, WaitStarting, WaitNotOnline, WaitUnassigned, WaitAtMax, WaitOverride, WaitDeciding}

// WaitingInput is what WaitingByCause judges from: the pool's state at one moment.
type WaitingInput struct {
	Now      time.Time
	Mode     PoolMode
	Bounds   Bounds
	Override bool
	SpecMax  int
	Reserved []Reservation
	Runners  []PoolRunner
}

// WaitingByCause counts the pool's waiting jobs (active reservations no runner runs) by cause,
// one count per WaitCauses entry. GitHub hands a job to whichever fitting runner asks first,
// so the oldest waiting jobs are paired with the oldest starting runners and judged by them;
// the rest by the pool's idle runners and bounds.
func WaitingByCause(in WaitingInput) []int {
	counts := make([]int, len(WaitCauses))
	add := func(cause string, n int) { counts[slices.Index(WaitCauses, cause)] += n }
	waiting := 0
	for _, r := range in.Reserved {
		if r.ExpiresAt.After(in.Now) && !slices.ContainsFunc(in.Runners, func(pr PoolRunner) bool { return pr.JobID == r.JobID }) {
			waiting++
		}
	}
	if in.Mode != PoolActive {
		add(WaitPaused, waiting)
		return counts
	}
	var starting []PoolRunner
	idle := 0
	for _, r := range in.Runners {
		switch r.State {
		case RunnerPending, RunnerRegistering:
			starting = append(starting, r)
		case RunnerIdle:
			idle++
		}
	}
	slices.SortStableFunc(starting, func(a, b PoolRunner) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, r := range starting[:min(waiting, len(starting))] {
		switch {
		case r.Blocked != nil:
			add(WaitQuota, 1)
		case r.State == RunnerRegistering:
			add(WaitNotOnline, 1)
		default:
			add(WaitStarting, 1)
		}
	}
	rest := max(waiting-len(starting), 0)
	unassigned := min(rest, idle)
	add(WaitUnassigned, unassigned)
	rest -= unassigned
	switch {
	case len(in.Runners) >= in.Bounds.Max && in.Override && in.Bounds.Max < in.SpecMax:
		add(WaitOverride, rest)
	case len(in.Runners) >= in.Bounds.Max:
		add(WaitAtMax, rest)
	default:
		add(WaitDeciding, rest)
	}
	return counts
}

// recordWaiting publishes MetricJobsWaiting for every cause (0 when none) through the
// replay-safe workflow metrics handler.
func (p *pool) recordWaiting(now time.Time) {
	b, override, _ := effectiveBounds(p.st.Spec, p.st.Scale, now)
	specMax := 0
	if p.st.Spec.MaxReplicas != nil {
		specMax = *p.st.Spec.MaxReplicas
	}
	counts := WaitingByCause(WaitingInput{Now: now, Mode: p.st.Mode, Bounds: b, Override: override, SpecMax: specMax,
		Reserved: p.st.Reserved.Reservations, Runners: p.st.Runners})
	m := workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name})
	for i, cause := range WaitCauses {
		m.WithTags(map[string]string{"cause": cause}).Gauge(MetricJobsWaiting).Update(float64(counts[i]))
	}
}
