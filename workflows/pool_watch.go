package workflows

import (
	"time"
)

// changeWatchRegistration gates the pool watching its runners' registration deadlines
// (RunnerInput.PoolWatches): a runner the pool starts holds no timer of its own while it
// registers or runs, and the pool asks a runner that has not reported idle or busy within its
// registration timeout to check its registration (SignalCheckRegistration). Every runner used
// to hold one durable timer, a billable action each, for a deadline that almost never passes;
// the pool already wakes for its listing while runners register, so its checks cost nothing
// until one is due. A runner workflow that no longer exists (terminated by hand before it
// reported) fails the signal, and the pool forgets and replaces it, as a child's completion
// told it before changeStartInBatches.
const changeWatchRegistration = "pool-watches-registration"

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
func (p *pool) askOverdueRegistrations(now time.Time) {
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
func (p *pool) nextRegistrationCheck() time.Time {
	timeout := p.st.Spec.RegistrationTimeoutOrDefault()
	var next time.Time
	for _, r := range p.st.Runners {
		if due := registrationCheckDue(r, timeout); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next
}
