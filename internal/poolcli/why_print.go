package poolcli

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// whyPath lists the job's path from the facts, oldest first; steps with no time are left out.
func whyPath(f WhyFacts) []Step {
	var steps []Step
	add := func(at time.Time, format string, args ...any) {
		if !at.IsZero() {
			steps = append(steps, Step{At: at, What: fmt.Sprintf(format, args...)})
		}
	}
	if u := f.Unmatched; u != nil {
		add(u.At, "delivery %s received from %s; labels %v fit no pool", u.DeliveryID, u.Repository, u.Labels)
	}
	if w := f.Prewarmed; w != nil {
		add(w.WarmedAt, "pool %s began warming runners for %s, predicted from %s run %d's graph", f.Pool.Name, w.Job, w.Repository, w.RunID)
	}
	if f.Reservation == nil {
		add(f.QueuedAt, "delivery received (queued event)")
	}
	if r := f.Reservation; r != nil {
		add(r.QueuedAt, "delivery received (queued event)")
		add(r.ReservedAt, "pool %s reserved capacity for it (until %s)", f.Pool.Name, clock(r.ExpiresAt))
		if d := decisionAfter(f.Pool.Decisions, r.ReservedAt); d != nil {
			add(d.At, "pool decided desired %d, started %v: %s", d.Desired, d.Started, d.Why)
		}
	}
	if s := f.ScaleSet; s != nil {
		if s.Job.OfferCarried {
			add(s.Job.OfferedAt, "offered to %s (before its listener's run began)", s.name())
		} else {
			add(s.Job.OfferedAt, "offered to %s", s.name())
		}
		if a := s.Job.Acquire; a != nil {
			add(a.At, "the listener acquired it: %s", a.Outcome)
		}
		add(s.Set.MessageAt, "%s's last message (%d)", s.name(), s.Set.Ledger.LastMessageID)
	}
	if r := f.Runner; r != nil {
		add(r.Started, "runner workflow %s started", r.WorkflowID)
		add(r.Status.PodCreatedAt, "pod %s created", r.Status.Name)
		add(r.PodScheduled, "pod scheduled")
		add(r.Status.OnlineAt, "runner online")
		if r.Status.JobID != 0 && r.Status.Busy {
			steps = append(steps, Step{What: fmt.Sprintf("job %d running on %s", r.Status.JobID, r.Status.Name)})
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int {
		if a.At.IsZero() || b.At.IsZero() {
			return 0
		}
		return a.At.Compare(b.At)
	})
	return steps
}

// decisionAfter is the first recorded decision that started runners at or after t.
func decisionAfter(ds []workflows.Decision, t time.Time) *workflows.Decision {
	for i, d := range ds {
		if len(d.Started) > 0 && !d.At.Before(t) {
			return &ds[i]
		}
	}
	return nil
}

// printWhy writes a report for a person.
func printWhy(w io.Writer, r WhyReport) {
	pool := r.Pool
	if pool == "" {
		pool = "-"
	}
	fmt.Fprintf(w, "Job %d  pool %s\n", r.Job, pool)
	for _, s := range r.Path {
		at := "         "
		if !s.At.IsZero() {
			at = clock(s.At)
		}
		fmt.Fprintf(w, "  %s  %s\n", at, s.What)
	}
	if r.Waiting {
		fmt.Fprintf(w, "Waiting: %s\n  %s\n", r.Cause, r.Detail)
	} else {
		fmt.Fprintf(w, "Not waiting: %s\n", r.Detail)
	}
	for _, s := range whySets(r.Facts) {
		fmt.Fprintf(w, "%s\n", s.summary())
	}
	if rf := r.Facts.Runner; rf != nil && rf.UILink != "" {
		fmt.Fprintf(w, "Runner workflow: %s\n", rf.UILink)
	}
}

// whySets are the sets a report speaks of: the one that knows the job, else every set (none
// holds it, and each says why).
func whySets(f WhyFacts) []ScaleSetFacts {
	for _, s := range f.ScaleSets {
		if s.Job.Place != SetUnknown {
			return []ScaleSetFacts{s}
		}
	}
	return f.ScaleSets
}

// summary is one line on a set for a person, capitalized: its listener and GitHub's
// statistics beside the pool's ledger, as `starter get` shows them.
func (s ScaleSetFacts) summary() string {
	listener := "not running"
	if s.Set.Listening {
		listener = "running"
	}
	last := "none yet"
	if !s.Set.MessageAt.IsZero() {
		last = fmt.Sprintf("%d at %s", s.Set.Ledger.LastMessageID, clock(s.Set.MessageAt))
	}
	st := s.Set.Statistics
	return fmt.Sprintf("S%s of pool %s: listener %s, session %q, last message %s; GitHub: %d assigned of maximum %d, %d running, %d available; ledger: %d waiting, %d running",
		s.name()[1:], s.Pool, listener, s.Set.SessionID, last, st.AssignedJobs, s.Set.ListenerMax, st.RunningJobs, st.AvailableJobs,
		len(s.Set.Ledger.Waiting), len(s.Set.Ledger.Running))
}
