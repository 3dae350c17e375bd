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
	if r := f.Reservation; r != nil {
		add(r.QueuedAt, "delivery received (queued event)")
		add(r.ReservedAt, "pool %s reserved capacity for it (until %s)", f.Pool.Name, clock(r.ExpiresAt))
		if d := decisionAfter(f.Pool.Decisions, r.ReservedAt); d != nil {
			add(d.At, "pool decided desired %d, started %v: %s", d.Desired, d.Started, d.Why)
		}
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
	if rf := r.Facts.Runner; rf != nil && rf.UILink != "" {
		fmt.Fprintf(w, "Runner workflow: %s\n", rf.UILink)
	}
}
