package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Unmatched jobs. A queued job whose labels no pool fits used to leave no trace a user could
// find; the intake now hands it to one long-lived workflow per deployment, which keeps the
// last UnmatchedJobsMax of them so `starter why <job>` can say "no pool matches" and which
// pools came close. A workflow, because Temporal is runnerflow's only state store: the record
// is durable across intake restarts and shared by every intake replica, and it costs one
// signal per unmatched queued job; a job a pool fits pays nothing.

// UnmatchedJobsWorkflowType is the unmatched-jobs workflow's registered name.
const UnmatchedJobsWorkflowType = "unmatched-jobs"

// UnmatchedJobsWorkflowID is the id of the deployment's one unmatched-jobs workflow.
const UnmatchedJobsWorkflowID = "unmatched-jobs"

// SignalUnmatchedJob records one unmatched queued job (UnmatchedJob); the intake sends it with
// signal-with-start.
const SignalUnmatchedJob = "unmatched-job"

// UnmatchedJob is a queued job no pool fits, as the intake saw it. No secret: the job's id,
// labels and repository are what GitHub's delivery names.
type UnmatchedJob struct {
	JobID      int64    `json:"jobId"`
	Repository string   `json:"repository,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	DeliveryID string   `json:"deliveryId,omitempty"`
	// At is when the intake took the delivery.
	At time.Time `json:"at,omitzero"`
}

// UnmatchedJobsInput starts (or continues) the workflow.
type UnmatchedJobsInput struct {
	// Jobs are carried across continue-as-new, oldest first.
	Jobs []UnmatchedJob `json:"jobs,omitempty"`
}

// UnmatchedJobsStatus answers QueryStatus: the kept jobs, oldest first.
type UnmatchedJobsStatus struct {
	Jobs []UnmatchedJob `json:"jobs"`
	// Max is how many are kept.
	Max int `json:"max"`
}

// RecordUnmatched adds a job to the record, keeping the newest max; a job already kept (a
// redelivery) keeps its first record.
func RecordUnmatched(jobs []UnmatchedJob, j UnmatchedJob, max int) []UnmatchedJob {
	if j.JobID <= 0 || slices.ContainsFunc(jobs, func(k UnmatchedJob) bool { return k.JobID == j.JobID }) {
		return jobs
	}
	jobs = append(jobs, j)
	if over := len(jobs) - max; over > 0 {
		jobs = slices.Delete(jobs, 0, over)
	}
	return jobs
}

// UnmatchedJobsWorkflow keeps the last UnmatchedJobsMax unmatched jobs. It never ends by
// itself; it continues as new when the server suggests it, with every signal drained first.
func UnmatchedJobsWorkflow(ctx workflow.Context, in UnmatchedJobsInput) error {
	jobs := in.Jobs
	err := workflow.SetQueryHandler(ctx, QueryStatus, func() (UnmatchedJobsStatus, error) {
		return UnmatchedJobsStatus{Jobs: jobs, Max: UnmatchedJobsMax}, nil
	})
	if err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, SignalUnmatchedJob)
	for {
		var j UnmatchedJob
		ch.Receive(ctx, &j)
		jobs = RecordUnmatched(jobs, j, UnmatchedJobsMax)
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			for ch.ReceiveAsync(&j) {
				jobs = RecordUnmatched(jobs, j, UnmatchedJobsMax)
			}
			return workflow.NewContinueAsNewError(onDecisionQueue(ctx, askUnmatchedDecidesApart), UnmatchedJobsWorkflowType, UnmatchedJobsInput{Jobs: jobs})
		}
	}
}
