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

// ReadJobsOutput is what GitHub said of each job read, in the input's order. A read that failed
// ends the list (the rest are read at the next check).
type ReadJobsOutput struct {
	Jobs []JobReading `json:"jobs,omitempty"`
}

// JobReading is one job as GitHub has it now. Gone: GitHub does not know it (404).
type JobReading struct {
	ID         int64  `json:"id"`
	Status     string `json:"status,omitempty"`
	Conclusion string `json:"conclusion,omitempty"`
	RunnerName string `json:"runnerName,omitempty"`
	Gone       bool   `json:"gone,omitempty"`
}

// jobCheck is a due check of reserved jobs: when, and which.
type jobCheck struct {
	due  time.Time
	jobs []JobRef
}

// planJobCheck decides whether the pool should read its reserved jobs at GitHub, and which:
// the reservations no runner of the pool serves (no runner has their job), the oldest first, at
// most ReservedJobCheckMax. Reservations made before they carried their repository cannot be
// read and are left to expire. Two things make them suspect:
//   - a runner of the pool ended after running a job the pool never learned of (its
//     in_progress and completed events were lost, or are late): one of them is over. Due
//     ReservedJobCheckSettle after the first such end (the ends of a burst come together), and
//     ReservedJobCheckSpacing after the last check;
//   - one of the pool's runners has stood idle for ReservedJobCheckAfter: GitHub hands a queued
//     job to a fitting idle runner within seconds, so the job is most likely over or served
//     elsewhere and its events were lost. Due ReservedJobCheckInterval after the last check, so
//     a job that really is still queued (its labels fit no online runner) costs a read that
//     often.
//
// Zero due: no check.
func planJobCheck(st PoolState, now time.Time) jobCheck {
	var jobs []JobRef
	for _, res := range st.Reserved.Reservations { // sorted by job id: the oldest jobs first
		if res.Repository == "" || !res.ExpiresAt.After(now) || servedByRunner(st.Runners, res.JobID) {
			continue
		}
		jobs = append(jobs, JobRef{ID: res.JobID, Repository: res.Repository})
		if len(jobs) == ReservedJobCheckMax {
			break
		}
	}
	if len(jobs) == 0 {
		return jobCheck{}
	}
	var due time.Time
	if len(st.UnattributedEnds) > 0 {
		due = laterOf(st.UnattributedEnds[0].Add(ReservedJobCheckSettle), st.LastJobCheck.Add(ReservedJobCheckSpacing))
	}
	var idleSince time.Time
	for _, r := range st.Runners {
		if r.State == RunnerIdle && !r.Draining && !r.Removing && (idleSince.IsZero() || r.Since.Before(idleSince)) {
			idleSince = r.Since
		}
	}
	if !idleSince.IsZero() {
		idleDue := laterOf(idleSince.Add(ReservedJobCheckAfter), st.LastJobCheck.Add(ReservedJobCheckInterval))
		if due.IsZero() || idleDue.Before(due) {
			due = idleDue
		}
	}
	if due.IsZero() {
		return jobCheck{}
	}
	return jobCheck{due: due, jobs: jobs}
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
// unattributed ends recorded before the check began are accounted for by it.
func (p *pool) checkReservedJobs(now time.Time) {
	if p.jobChecking {
		return
	}
	plan := planJobCheck(p.st, now)
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
		p.st.UnattributedEnds = slices.DeleteFunc(p.st.UnattributedEnds, func(at time.Time) bool { return !at.After(now) })
		if events := jobReadingsAsEvents(out.Jobs); len(events) > 0 {
			_, _ = p.reserve(ctx, ReservationBatch{WindowID: "job-check", Events: events})
		}
	})
}

// recordUnattributedEnd remembers a runner that ended after a job the pool never learned of
// (unattributedEnd), when its reservations can be checked at GitHub.
func (p *pool) recordUnattributedEnd(r PoolRunner, rep RunnerStateReport) {
	if !unattributedEnd(r, rep, p.st.Spec.IsEphemeral()) ||
		workflow.GetVersion(p.ctx, changeCheckReservedJobs, workflow.DefaultVersion, 1) < 1 {
		return
	}
	now := workflow.Now(p.ctx)
	p.st.UnattributedEnds = append(slices.DeleteFunc(p.st.UnattributedEnds, func(at time.Time) bool {
		return now.Sub(at) >= UnattributedEndHold
	}), now)
	if len(p.st.UnattributedEnds) > ReservedJobCheckMax {
		p.st.UnattributedEnds = slices.Clone(p.st.UnattributedEnds[len(p.st.UnattributedEnds)-ReservedJobCheckMax:])
	}
}

// changeJobCheckWake gates the pool waking for a due check of reserved jobs (nextJobCheck).
// Asked only when one is due, so histories without a reservation no runner serves carry no
// marker.
const changeJobCheckWake = "job-check-wake"

// nextJobCheck is when a check of reserved jobs is due, zero if none.
func (p *pool) nextJobCheck(now time.Time) time.Time {
	if p.jobChecking {
		return time.Time{}
	}
	due := planJobCheck(p.st, now).due
	if due.IsZero() || workflow.GetVersion(p.ctx, changeJobCheckWake, workflow.DefaultVersion, 1) < 1 {
		return time.Time{}
	}
	return due
}
