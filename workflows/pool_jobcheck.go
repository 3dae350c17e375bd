package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// changeCheckReservedJobs gates the pool reading, at GitHub, the jobs of reservations that no
// runner serves while its runners stand idle (checkReservedJobs). Asked only when a check is
// due, so histories of pools whose books always agreed with GitHub carry no marker.
const changeCheckReservedJobs = "check-reserved-jobs"

// ActivityReadJobs reads workflow jobs at GitHub, one GET each (activities.GitHubActivities),
// on the GitHub task queue under the budget.
const ActivityReadJobs = "ReadJobs"

// ReadJobsInput names the jobs to read.
type ReadJobsInput struct {
	Pool string   `json:"pool"`
	Jobs []JobRef `json:"jobs"`
}

// JobRef is one job and the repository GitHub files it under.
type JobRef struct {
	ID         int64  `json:"id"`
	Repository string `json:"repository"`
}

// ReadJobsOutput is what GitHub said of each job read, in the input's order. A read that
// failed partway is an error, never a shorter list, so only the jobs in Unread are missing
// (answers recorded by earlier builds may be cut short: a read that failed ended the list).
type ReadJobsOutput struct {
	Jobs []JobReading `json:"jobs,omitempty"`
	// Unread are the jobs this credential can never read (their repository refused or not
	// one GitHub could answer for): the check accounts for nothing through them.
	Unread []int64 `json:"unread,omitempty"`
}

// JobReading is one job as GitHub has it now. Gone: GitHub does not know it (404).
type JobReading struct {
	ID         int64  `json:"id"`
	Status     string `json:"status,omitempty"`
	Conclusion string `json:"conclusion,omitempty"`
	RunnerName string `json:"runnerName,omitempty"`
	Gone       bool   `json:"gone,omitempty"`
}

// changeCheckStaleReservations gates the pool reading, at GitHub, reserved jobs renewed
// ReservationRenewalsBeforeCheck times without a runner online for them, with no idle runner
// needed (jobCheckRules.staleRenewals). Asked only when such a reservation exists, which only
// pools under changeRenewUnserved count.
const changeCheckStaleReservations = "check-stale-reservations"

// changeLiftReadEnds gates lifting an unattributed end only for jobs the check read
// (endsAccountedFor), and ends past UnattributedEndHold no longer prompting checks
// (jobCheckRules.heldEndsOnly). Asked only where either changes what the pool does.
const changeLiftReadEnds = "lift-ends-for-read-jobs"

// jobCheck is a due check of reserved jobs: when, and which. whole is set when the jobs are
// every reservation no runner serves (none left out for ReservedJobCheckMax or for want of a
// repository).
type jobCheck struct {
	due   time.Time
	jobs  []JobRef
	whole bool
}

// jobCheckRules are the rules planJobCheck applies beyond the first, by the pool's change ids.
type jobCheckRules struct {
	// staleRenewals, when positive, makes a check due once a reservation no runner serves has
	// been renewed this many times (Reservation.Renewals): no runner came online for its job
	// for that long (a bad image, a quota never raised, a paused pool), and its completion may
	// have been lost meanwhile. Due StaleReservationCheckInterval after the last check.
	staleRenewals int
	// heldEndsOnly counts only the unattributed ends still held (younger than
	// UnattributedEndHold) as making a check due: an end past its hold counts for nothing
	// any more, so it prompts no read.
	heldEndsOnly bool
}

// planJobCheck decides whether the pool should read its reserved jobs at GitHub, and which:
// the reservations no runner of the pool serves (no runner has their job), the oldest first, at
// most ReservedJobCheckMax. Reservations made before they carried their repository cannot be
// read and are left to expire. Three things make them suspect:
//   - a runner of the pool ended after running a job the pool never learned of (its
//     in_progress and completed events were lost, or are late): one of them is over. Due
//     ReservedJobCheckSettle after the first such end (the ends of a burst come together), and
//     ReservedJobCheckSpacing after the last check;
//   - one of the pool's runners has stood idle for ReservedJobCheckAfter: GitHub hands a queued
//     job to a fitting idle runner within seconds, so the job is most likely over or served
//     elsewhere and its events were lost. Due ReservedJobCheckInterval after the last check, so
//     a job that really is still queued (its labels fit no online runner) costs a read that
//     often;
//   - with rules.staleRenewals, a reservation renewed that often with no runner online for it.
//
// Zero due: no check.
func planJobCheck(st PoolState, now time.Time, rules jobCheckRules) jobCheck {
	var jobs []JobRef
	stale, whole := false, true
	for _, res := range st.Reserved.Reservations { // sorted by job id: the oldest jobs first
		if !res.ExpiresAt.After(now) || servedByRunner(st.Runners, res.JobID) {
			continue
		}
		if res.Repository == "" {
			whole = false
			continue
		}
		stale = stale || (rules.staleRenewals > 0 && res.Renewals >= rules.staleRenewals)
		if len(jobs) == ReservedJobCheckMax {
			whole = false
			continue
		}
		jobs = append(jobs, JobRef{ID: res.JobID, Repository: res.Repository})
	}
	if len(jobs) == 0 {
		return jobCheck{}
	}
	var due time.Time
	ends := st.UnattributedEnds
	if rules.heldEndsOnly {
		ends = slices.DeleteFunc(slices.Clone(ends), func(at time.Time) bool { return now.Sub(at) >= UnattributedEndHold })
	}
	if len(ends) > 0 {
		due = laterOf(ends[0].Add(ReservedJobCheckSettle), st.LastJobCheck.Add(ReservedJobCheckSpacing))
	}
	due = earlierOf(due, idleCheckDue(st.Runners, st.LastJobCheck))
	if stale {
		due = earlierOf(due, st.LastJobCheck.Add(StaleReservationCheckInterval))
	}
	if due.IsZero() {
		return jobCheck{}
	}
	return jobCheck{due: due, jobs: jobs, whole: whole}
}

// idleCheckDue is when a check is due for a runner standing idle: ReservedJobCheckAfter after
// the longest-idle runner (not leaving) went idle, and ReservedJobCheckInterval after the last
// check. Zero: no runner stands idle.
func idleCheckDue(runners []PoolRunner, last time.Time) time.Time {
	var idleSince time.Time
	for _, r := range runners {
		if r.State == RunnerIdle && !r.Draining && !r.Removing && (idleSince.IsZero() || r.Since.Before(idleSince)) {
			idleSince = r.Since
		}
	}
	if idleSince.IsZero() {
		return time.Time{}
	}
	return laterOf(idleSince.Add(ReservedJobCheckAfter), last.Add(ReservedJobCheckInterval))
}

// earlierOf is the earlier of two times, a zero time counting as none.
func earlierOf(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// unattributedEnd reports whether a runner's final report says it ran a job the pool does not
// know: an ephemeral runner whose pod succeeded (its runner exits after its one job) while
// neither the pool nor the runner learned which job it was.
func unattributedEnd(r PoolRunner, rep RunnerStateReport, ephemeral bool) bool {
	return ephemeral && rep.State == RunnerDone && rep.Reason == EndReasonPodSucceeded &&
		r.JobID == 0 && rep.EndedJob == 0 && rep.JobID == 0
}

// heldUnattributed counts the unattributed ends that still stand for a reservation that is
// over: those younger than UnattributedEndHold. Each lowers the reservations the pool counts by
// one until a check of reserved jobs at GitHub says which job it was, so the pool does not
// start a runner for a job that has already run; the hold bounds the wait if the check cannot
// be made.
func heldUnattributed(ends []time.Time, now time.Time) int {
	n := 0
	for _, at := range ends {
		if now.Sub(at) < UnattributedEndHold {
			n++
		}
	}
	return n
}

// servedByRunner reports whether one of the runners has the job.
func servedByRunner(runners []PoolRunner, job int64) bool {
	return slices.ContainsFunc(runners, func(r PoolRunner) bool { return r.JobID == job && !r.State.Terminal() })
}

// jobReadingsAsEvents turns what GitHub said of the jobs into the workflow_job events that were
// lost: a completed or vanished job releases its reservation; a job in progress names its
// runner (another pool's releases it here, one of this pool's is tied to it). A job still
// queued or waiting changes nothing.
func jobReadingsAsEvents(readings []JobReading) []WorkflowJobEvent {
	var events []WorkflowJobEvent
	for _, j := range readings {
		switch {
		case j.Gone || j.Status == JobCompleted:
			events = append(events, WorkflowJobEvent{JobID: j.ID, Action: JobCompleted, Conclusion: j.Conclusion, RunnerName: j.RunnerName})
		case j.Status == JobInProgress && j.RunnerName != "":
			events = append(events, WorkflowJobEvent{JobID: j.ID, Action: JobInProgress, RunnerName: j.RunnerName})
		}
	}
	return events
}

// checkReservedJobs reads, beside the loop, the jobs planJobCheck finds suspect, and applies
// what GitHub says of them to the reservation book as the events that were lost. The
// unattributed ends recorded before the check began are accounted for by what it read
// (liftUnattributedEnds).
func (p *poolRun) checkReservedJobs(now time.Time) {
	if p.jobChecking {
		return
	}
	plan := planJobCheck(p.st, now, p.jobCheckRules(now))
	if plan.due.IsZero() || now.Before(plan.due) ||
		workflow.GetVersion(p.ctx, changeCheckReservedJobs, workflow.DefaultVersion, 1) < 1 {
		return
	}
	p.jobChecking = true
	p.st.LastJobCheck = now
	in := ReadJobsInput{Pool: p.st.Spec.Name, Jobs: plan.jobs}
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		out, err := runActivity[ReadJobsInput, ReadJobsOutput](ctx, ReadJobsPolicy, ActivityReadJobs, in)
		p.jobChecking = false
		p.changed = true
		if err != nil {
			p.logger.Warn("Reading reserved jobs at GitHub failed", "error", err)
			return
		}
		p.liftUnattributedEnds(plan, out, now)
		if events := jobReadingsAsEvents(out.Jobs); len(events) > 0 {
			_, _ = p.reserve(ctx, ReservationBatch{WindowID: "job-check", Events: events})
		}
	})
}

// recordUnattributedEnd remembers a runner that ended after a job the pool never learned of
// (unattributedEnd), when its reservations can be checked at GitHub.
func (p *poolRun) recordUnattributedEnd(r PoolRunner, rep RunnerStateReport) {
	if !unattributedEnd(r, rep, p.st.Spec.IsEphemeral()) ||
		workflow.GetVersion(p.ctx, changeCheckReservedJobs, workflow.DefaultVersion, 1) < 1 {
		return
	}
	if r.JobDone && workflow.GetVersion(p.ctx, changeEndsCountedOnce, workflow.DefaultVersion, 1) >= 1 {
		return // its job's completed event (markJobsDone) already ended the job's reservation
	}
	now := workflow.Now(p.ctx)
	p.st.UnattributedEnds = append(slices.DeleteFunc(p.st.UnattributedEnds, func(at time.Time) bool {
		return now.Sub(at) >= UnattributedEndHold
	}), now)
	if len(p.st.UnattributedEnds) > ReservedJobCheckMax {
		p.st.UnattributedEnds = slices.Clone(p.st.UnattributedEnds[len(p.st.UnattributedEnds)-ReservedJobCheckMax:])
	}
}

// changeEndsCountedOnce gates counting a finished job's end once. An ephemeral runner that
// ends before the pool learns its job holds one reservation over (an unattributed end) until
// the job is known to be over; the job's own completed or in_progress event ends its
// reservation as well, so the two together counted the job twice, desired fell one short,
// and scale-down drained a runner still starting for another job. Now the runner named by
// its job's completed event makes no unattributed end (recordUnattributedEnd), and an event
// that ends a reservation for a runner that ended so lifts one (liftEndsNamedByEvents).
// Asked only where one of these happens.
const changeEndsCountedOnce = "ends-counted-once"

// endsNamedByEvents counts the batch's jobs whose event ends a reservation that still holds
// and names one of the pool's runners that has already ended, not as a failure: that runner
// ended after its job without the pool learning which (an unattributed end, if its pod
// succeeded), and the event now ends the job's reservation itself. A runner ended otherwise
// (its pod failed, it was removed) is skipped: its end made no unattributed end. One aged out
// of the pool's finished list counts, as most runners end so in a burst.
func endsNamedByEvents(st PoolState, batch ReservationBatch, now time.Time) int {
	var jobs []int64
	for _, ev := range batch.Events {
		if (ev.Action != JobCompleted && ev.Action != JobInProgress) || ev.JobID <= 0 ||
			slices.Contains(jobs, ev.JobID) || !st.Reserved.Holds(ev.JobID, now) {
			continue
		}
		if owner, ok := PoolFromRunnerName(ev.RunnerName); !ok || owner != st.Spec.Name ||
			slices.ContainsFunc(st.Runners, func(r PoolRunner) bool { return r.Name == ev.RunnerName }) {
			continue
		}
		i := slices.IndexFunc(st.Finished, func(f FinishedRunner) bool { return f.Name == ev.RunnerName })
		if i >= 0 && (st.Finished[i].State != RunnerDone || st.Finished[i].Reason != EndReasonPodSucceeded) {
			continue
		}
		jobs = append(jobs, ev.JobID)
	}
	return len(jobs)
}

// liftHeldEnds removes the n oldest unattributed ends that still hold at now; ends past
// their hold count for nothing already and stay for the job check's rules.
func liftHeldEnds(ends []time.Time, now time.Time, n int) []time.Time {
	var kept []time.Time
	for _, at := range ends {
		if n > 0 && now.Sub(at) < UnattributedEndHold {
			n--
			continue
		}
		kept = append(kept, at)
	}
	return kept
}

// liftEndsNamedByEvents lifts the unattributed ends that a batch's events account for
// (endsNamedByEvents, counted before the batch was applied).
func (p *poolRun) liftEndsNamedByEvents(named int, now time.Time) {
	if named == 0 || !p.st.Spec.IsEphemeral() || heldUnattributed(p.st.UnattributedEnds, now) == 0 ||
		workflow.GetVersion(p.ctx, changeEndsCountedOnce, workflow.DefaultVersion, 1) < 1 {
		return
	}
	p.st.UnattributedEnds = liftHeldEnds(p.st.UnattributedEnds, now, named)
}

// changeJobCheckWake gates the pool waking for a due check of reserved jobs (nextJobCheck).
// Asked only when one is due, so histories without a reservation no runner serves carry no
// marker.
const changeJobCheckWake = "job-check-wake"

// nextJobCheck is when a check of reserved jobs is due, zero if none.
func (p *poolRun) nextJobCheck(now time.Time) time.Time {
	if p.jobChecking {
		return time.Time{}
	}
	due := planJobCheck(p.st, now, p.jobCheckRules(now)).due
	if due.IsZero() || workflow.GetVersion(p.ctx, changeJobCheckWake, workflow.DefaultVersion, 1) < 1 {
		return time.Time{}
	}
	return due
}

// jobCheckRules are the job check's rules in force. Each is asked only where it changes the
// plan (a reservation renewed often enough, an end past its hold), so histories without one
// carry no marker.
func (p *poolRun) jobCheckRules(now time.Time) jobCheckRules {
	var rules jobCheckRules
	if slices.ContainsFunc(p.st.Reserved.Reservations, func(r Reservation) bool { return r.Renewals >= ReservationRenewalsBeforeCheck }) &&
		workflow.GetVersion(p.ctx, changeCheckStaleReservations, workflow.DefaultVersion, 1) >= 1 {
		rules.staleRenewals = ReservationRenewalsBeforeCheck
	}
	if slices.ContainsFunc(p.st.UnattributedEnds, func(at time.Time) bool { return now.Sub(at) >= UnattributedEndHold }) &&
		workflow.GetVersion(p.ctx, changeLiftReadEnds, workflow.DefaultVersion, 1) >= 1 {
		rules.heldEndsOnly = true
	}
	return rules
}

// liftUnattributedEnds ends the hold of the unattributed ends recorded by began (when the
// check began) that the check accounts for (endsAccountedFor); the others hold on, and prompt
// the next check, until UnattributedEndHold.
func (p *poolRun) liftUnattributedEnds(plan jobCheck, out ReadJobsOutput, began time.Time) {
	before := 0
	for _, at := range p.st.UnattributedEnds {
		if !at.After(began) {
			before++
		}
	}
	n := endsAccountedFor(plan, out, before)
	if n < before && workflow.GetVersion(p.ctx, changeLiftReadEnds, workflow.DefaultVersion, 1) < 1 {
		n = before // the rule before: a check accounted for every end before it
	}
	p.st.UnattributedEnds = liftEnds(p.st.UnattributedEnds, began, n)
	if len(out.Unread) > 0 {
		p.logger.Warn("Reserved jobs cannot be read at GitHub with this credential", "jobs", out.Unread)
	}
}

// endsAccountedFor is how many of the before unattributed ends recorded before a check it
// accounts for. A check that read every reservation no runner serves found any of them that
// is over (and released it): it accounts for them all. Any other check (a job unread, a
// reservation left out) accounts for no more than the jobs it found over, because the jobs
// the ended runners ran may be among those it did not read.
func endsAccountedFor(plan jobCheck, out ReadJobsOutput, before int) int {
	read := make([]int64, 0, len(out.Jobs))
	over := 0
	for _, j := range out.Jobs {
		read = append(read, j.ID)
		if j.Gone || j.Status == JobCompleted {
			over++
		}
	}
	if plan.whole && !slices.ContainsFunc(plan.jobs, func(ref JobRef) bool { return !slices.Contains(read, ref.ID) }) {
		return before
	}
	return min(before, over)
}

// liftEnds removes the first n ends at or before began (the oldest: ends are recorded in
// time order) and returns the rest.
func liftEnds(ends []time.Time, began time.Time, n int) []time.Time {
	var kept []time.Time
	for _, at := range ends {
		if n > 0 && !at.After(began) {
			n--
			continue
		}
		kept = append(kept, at)
	}
	return kept
}
