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

// planJobCheck decides whether the pool should read its reserved jobs at GitHub, and which. A
// reservation that no runner of the pool serves (no runner has its job) while one of the pool's
// runners has stood idle for ReservedJobCheckAfter is suspect: GitHub hands a queued job to an
// idle runner that fits it within seconds, so the job is most likely over or served
// elsewhere and its completed or in_progress event was lost (the intake could not take it,
// GitHub could not deliver it). The oldest such jobs are read, at most ReservedJobCheckMax,
// no sooner than next (the last check's ReservedJobCheckInterval). Reservations made before
// they carried their repository cannot be read and are left to expire. Zero due: no check.
func planJobCheck(st PoolState, now, next time.Time) jobCheck {
	var idleSince time.Time
	for _, r := range st.Runners {
		if r.State == RunnerIdle && !r.Draining && !r.Removing && (idleSince.IsZero() || r.Since.Before(idleSince)) {
			idleSince = r.Since
		}
	}
	if idleSince.IsZero() {
		return jobCheck{}
	}
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
	due := idleSince.Add(ReservedJobCheckAfter)
	if next.After(due) {
		due = next
	}
	return jobCheck{due: due, jobs: jobs}
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
// what GitHub says of them to the reservation book as the events that were lost.
func (p *pool) checkReservedJobs(now time.Time) {
	if p.jobChecking {
		return
	}
	plan := planJobCheck(p.st, now, p.st.NextJobCheck)
	if plan.due.IsZero() || now.Before(plan.due) ||
		workflow.GetVersion(p.ctx, changeCheckReservedJobs, workflow.DefaultVersion, 1) < 1 {
		return
	}
	p.jobChecking = true
	in := ReadJobsInput{Pool: p.st.Spec.Name, Jobs: plan.jobs}
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		out, err := runActivity[ReadJobsInput, ReadJobsOutput](ctx, ReadJobsPolicy, ActivityReadJobs, in)
		p.jobChecking = false
		p.changed = true
		p.st.NextJobCheck = workflow.Now(ctx).Add(ReservedJobCheckInterval)
		if err != nil {
			p.logger.Warn("Reading reserved jobs at GitHub failed", "error", err)
			return
		}
		if events := jobReadingsAsEvents(out.Jobs); len(events) > 0 {
			_, _ = p.reserve(ctx, ReservationBatch{WindowID: "job-check", Events: events})
		}
	})
}

// nextJobCheck is when a check of reserved jobs is due, zero if none.
func (p *pool) nextJobCheck(now time.Time) time.Time {
	if p.jobChecking {
		return time.Time{}
	}
	return planJobCheck(p.st, now, p.st.NextJobCheck).due
}
