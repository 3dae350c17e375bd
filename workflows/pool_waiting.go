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

// WaitingByCause counts the pool's waiting jobs by cause, one count per WaitCauses entry
// (WaitingCauses).
func WaitingByCause(in WaitingInput) []int {
	counts := make([]int, len(WaitCauses))
	for _, jw := range WaitingCauses(in) {
		counts[slices.Index(WaitCauses, jw.Cause)]++
	}
	return counts
}

// JobWait is one waiting job and its cause.
type JobWait struct {
	JobID int64
	Cause string
}

// WaitingCauses judges each waiting job (an active reservation no runner runs), oldest first.
// GitHub hands a job to whichever fitting runner asks first, so the oldest waiting jobs are
// paired with the oldest starting runners and judged by them; the rest by the pool's idle
// runners and bounds.
func WaitingCauses(in WaitingInput) []JobWait {
	running := make(map[int64]bool, len(in.Runners)) // looked up only, never ranged over
	for _, r := range in.Runners {
		if r.JobID != 0 {
			running[r.JobID] = true
		}
	}
	var waiting []Reservation
	for _, r := range in.Reserved {
		if r.ExpiresAt.After(in.Now) && !running[r.JobID] {
			waiting = append(waiting, r)
		}
	}
	slices.SortStableFunc(waiting, func(a, b Reservation) int { return waitingSince(a).Compare(waitingSince(b)) })
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
	out := make([]JobWait, 0, len(waiting))
	for i, res := range waiting {
		out = append(out, JobWait{JobID: res.JobID, Cause: waitCause(in, starting, idle, i)})
	}
	return out
}

// waitCause is the cause of the i-th oldest waiting job.
func waitCause(in WaitingInput, starting []PoolRunner, idle, i int) string {
	switch {
	case in.Mode != PoolActive:
		return WaitPaused
	case i < len(starting) && starting[i].Blocked != nil:
		return WaitQuota
	case i < len(starting) && starting[i].State == RunnerRegistering:
		return WaitNotOnline
	case i < len(starting):
		return WaitStarting
	case i < len(starting)+idle:
		return WaitUnassigned
	case len(in.Runners) >= in.Bounds.Max && in.Override && in.Bounds.Max < in.SpecMax:
		return WaitOverride
	case len(in.Runners) >= in.Bounds.Max:
		return WaitAtMax
	}
	return WaitDeciding
}

// waitingSince is when a job began to wait: its queued event's time, else when it was reserved.
func waitingSince(r Reservation) time.Time {
	if !r.QueuedAt.IsZero() {
		return r.QueuedAt
	}
	return r.ReservedAt
}

// recordWaiting publishes MetricJobsWaiting for every cause (0 when none) through the
// replay-safe workflow metrics handler.
func (p *poolRun) recordWaiting(now time.Time) {
	b, override, _ := effectiveBounds(p.st.Spec, p.st.Scale, now)
	specMax := 0
	if p.st.Spec.MaxReplicas != nil {
		specMax = *p.st.Spec.MaxReplicas
	}
	jobs := WaitingCauses(WaitingInput{Now: now, Mode: p.st.Mode, Bounds: b, Override: override, SpecMax: specMax,
		Reserved: p.st.Reserved.Reservations, Runners: p.st.Runners})
	index := make(map[int64]int, len(p.st.Reserved.Reservations)) // looked up only, never ranged over
	for i, r := range p.st.Reserved.Reservations {
		index[r.JobID] = i
	}
	counts := make([]int, len(WaitCauses))
	for _, jw := range jobs {
		counts[slices.Index(WaitCauses, jw.Cause)]++
		p.st.Reserved.Reservations[index[jw.JobID]].holdBy(jw.Cause, now)
	}
	m := workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name})
	for i, cause := range WaitCauses {
		m.WithTags(map[string]string{"cause": cause}).Gauge(MetricJobsWaiting).Update(float64(counts[i]))
	}
}

// MetricJobWait is the histogram of a job's wait from queued to its runner taking it, by the
// cause that held it longest (WaitCauses, as the pool saw them at each of its looks).
const MetricJobWait = "runnerflow_job_wait_seconds"

// holdBy closes the interval since the pool's last look, which the cause seen then held, and
// starts one held by cause.
func (r *Reservation) holdBy(cause string, now time.Time) {
	r.closeHold(now)
	r.HeldBy, r.HeldSince = cause, now
}

func (r *Reservation) closeHold(now time.Time) {
	if r.HeldBy == "" || !now.After(r.HeldSince) {
		return
	}
	d := now.Sub(r.HeldSince)
	if i := slices.IndexFunc(r.Held, func(h CauseHeld) bool { return h.Cause == r.HeldBy }); i >= 0 {
		r.Held[i].For += d
	} else {
		r.Held = append(r.Held, CauseHeld{Cause: r.HeldBy, For: d})
	}
	r.HeldSince = now
}

// LongestHeld is the cause that held a job longest (the first in WaitCauses order on a tie);
// empty when none was seen.
func LongestHeld(held []CauseHeld) string {
	best := CauseHeld{}
	for _, cause := range WaitCauses {
		for _, h := range held {
			if h.Cause == cause && h.For > best.For {
				best = h
			}
		}
	}
	return best.Cause
}

// jobTaken measures a reserved job's wait once its runner took it: queued to now, by the cause
// that held it longest. A job its pool never saw waiting (taken at once) counts as
// runner-starting, the cause of a job that waits for nothing but its runner.
func (p *poolRun) jobTaken(job int64, now time.Time) {
	i := slices.IndexFunc(p.st.Reserved.Reservations, func(r Reservation) bool { return r.JobID == job })
	if i < 0 {
		return
	}
	r := &p.st.Reserved.Reservations[i]
	if r.Started || waitingSince(*r).IsZero() {
		return
	}
	r.closeHold(now)
	r.Started, r.HeldBy = true, ""
	cause := LongestHeld(r.Held)
	if cause == "" {
		cause = WaitStarting
	}
	workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name, "cause": cause}).
		Timer(MetricJobWait).Record(max(now.Sub(waitingSince(*r)), 0))
}

// measureJobsTakenEarly measures the jobs whose queued event reached the pool after a runner of
// its had already taken them (the runner's report is often quicker than the scale window).
func (p *poolRun) measureJobsTakenEarly(batch ReservationBatch, now time.Time) {
	for _, ev := range batch.Events {
		if ev.Action == JobQueued && slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool { return r.JobID == ev.JobID }) {
			p.jobTaken(ev.JobID, now)
		}
	}
}
