package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// registrationCheckDue is when the pool next asks a watched runner to check its registration,
// or zero when it need not: the runner reported idle or busy, is draining, or its workflow has
// not started yet. The runner's own timeout counts from its pod's creation, later than the
// pool's start of it, so the runner waits out whatever is left when asked early.
func registrationCheckDue(r PoolRunner, timeout time.Duration) time.Time {
	if !r.Watched || !r.Started || r.Draining || r.Removing || (r.State != RunnerPending && r.State != RunnerRegistering) {
		return time.Time{}
	}
	base := r.StartedAt
	if r.CheckAskedAt.After(base) {
		base = r.CheckAskedAt
	}
	return base.Add(timeout)
}

// askOverdueRegistrations signals each watched runner whose registration check is due.
func (p *poolRun) askOverdueRegistrations(now time.Time) {
	timeout := p.st.Spec.RegistrationTimeoutOrDefault()
	for i := range p.st.Runners {
		r := &p.st.Runners[i]
		if due := registrationCheckDue(*r, timeout); !due.IsZero() && !now.Before(due) {
			r.CheckAskedAt = now
			p.signal(r.Name, SignalCheckRegistration, CheckRegistrationRequest{})
		}
	}
}

// nextRegistrationCheck is the earliest registration check due, zero if none.
func (p *poolRun) nextRegistrationCheck() time.Time {
	timeout := p.st.Spec.RegistrationTimeoutOrDefault()
	var next time.Time
	for _, r := range p.st.Runners {
		if due := registrationCheckDue(r, timeout); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next
}

// ActivityListEndedRunners lists a pool's runner workflows that ended without running any of
// their own code at the end — terminated (by hand) or timed out — since a time, from Temporal's
// visibility (activities.TemporalActivities). Every other end (done, failed, cancelled) sends
// the pool a final report first. It is how the pool learns of a runner workflow that could not
// report: its runners are not its children, so no child completion tells it. One listing call a
// check, whatever the number of runners, and almost always an empty answer.
const ActivityListEndedRunners = "ListEndedRunners"

// ListEndedRunnersInput names the pool and how far back to look.
type ListEndedRunnersInput struct {
	Pool  string    `json:"pool"`
	Since time.Time `json:"since"`
}

// ListEndedRunnersOutput lists the ended runner workflows, by runner name.
type ListEndedRunnersOutput struct {
	Ended []EndedRunner `json:"ended,omitempty"`
}

// EndedRunner is one runner workflow that ended: how, and when.
type EndedRunner struct {
	Name     string    `json:"name"`
	Status   string    `json:"status"`
	ClosedAt time.Time `json:"closedAt"`
}

// checkRunnerWorkflows lists, beside the loop, the runner workflows that ended since the last
// check (every runnerCheckInterval), while the pool watches started runners (those it
// started since changeWatchRegistration). A tracked runner whose workflow ended more than
// PoolRunnerEndGrace ago without its final report reaching the pool is forgotten (and
// replaced if still needed).
func (p *poolRun) checkRunnerWorkflows(now time.Time) {
	if p.checking || now.Before(p.st.NextRunnerCheck) || !slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool { return r.Watched && r.Started }) {
		return
	}
	since := p.st.LastRunnerCheck.Add(-PoolRunnerCheckOverlap)
	if p.st.LastRunnerCheck.IsZero() {
		since = now.Add(-PoolRunnerCheckOverlap)
	}
	p.checking = true
	in := ListEndedRunnersInput{Pool: p.st.Spec.Name, Since: since}
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		out, err := runActivity[ListEndedRunnersInput, ListEndedRunnersOutput](ctx, PoolRunnerCheckPolicy, ActivityListEndedRunners, in)
		done := workflow.Now(ctx)
		p.checking = false
		p.changed = true
		p.st.NextRunnerCheck = done.Add(p.runnerCheckInterval())
		if err != nil {
			p.logger.Warn("Runner workflow check failed", "error", err)
			return
		}
		p.st.LastRunnerCheck = now
		for _, e := range out.Ended {
			i := p.find(e.Name)
			if i < 0 || !p.st.Runners[i].Started || done.Sub(e.ClosedAt) < PoolRunnerEndGrace {
				continue // reported already, not this pool's to judge yet, or its report may be on its way
			}
			p.forget(e.Name, endedState(e.Status), "runner workflow ended without a report ("+e.Status+")")
		}
	})
}

// endedState is the runner state a workflow that ended without a report is remembered with: an
// operator's termination is not a failure (no start back-off); a timeout is.
func endedState(status string) RunnerState {
	if status == "Terminated" {
		return RunnerDone
	}
	return RunnerFailed
}

// changeRunnerCheckAtRest gates the at-rest pace of checkRunnerWorkflows: PoolRunnerCheckInterval
// instead of the listing's PoolListingInterval. Asked only at rest, where the two differ.
const changeRunnerCheckAtRest = "runner-check-at-rest"

// runnerCheckInterval: the listing's short interval while runners register (a runner that ends
// then is replaced soon), PoolRunnerCheckInterval at rest (a runner terminated by hand is the
// rare case the check is for, and each check is an activity and a timer).
func (p *poolRun) runnerCheckInterval() time.Duration {
	if p.registering() {
		return PoolListingIntervalStarting
	}
	if workflow.GetVersion(p.ctx, changeRunnerCheckAtRest, workflow.DefaultVersion, 1) < 1 {
		return PoolListingInterval
	}
	return PoolRunnerCheckInterval
}
