package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Scale-up latency histograms the runner workflow records through workflow.GetMetricsHandler
// (replay-safe: nothing is recorded again when a history is replayed). Both start when GitHub
// queued the job (workflow_job.created_at, carried by the job-started notice) and are recorded
// once per job, when the job starts on this runner; docs/metrics.md describes them.
const (
	// MetricScaleUpPodCreated: queued → the pod of the runner that took the job was created.
	MetricScaleUpPodCreated = "runnerflow_scale_up_pod_created_seconds"
	// MetricScaleUpRunnerOnline: queued → that runner was known online.
	MetricScaleUpRunnerOnline = "runnerflow_scale_up_runner_online_seconds"
)

// noteOnline stamps the first moment of this attempt the runner was known online.
func (o *RunnerObservations) noteOnline(now time.Time) {
	if o.Online && o.OnlineAt.IsZero() {
		o.OnlineAt = now
	}
}

// isNewJob reports whether a job-started notice is about a job this runner has not started
// or finished yet (GitHub and people redeliver).
func (o *RunnerObservations) isNewJob(s JobSignal) bool {
	return s.JobID != 0 && s.JobID != o.JobID && !slices.Contains(o.RecentJobs, s.JobID)
}

// recordScaleUpLatency records how long after the job was queued this runner's pod was
// created and the runner was online. A runner that was there before the job was queued (warm,
// persistent) records zero: the job waited for no scale-up. Times are workflow times; GitHub's
// created_at has whole seconds, so sub-second values are rounded up by up to a second.
func (r *runner) recordScaleUpLatency(ctx workflow.Context, s JobSignal) {
	if s.QueuedAt.IsZero() || r.obs.AttemptStart.IsZero() || r.obs.OnlineAt.IsZero() {
		return
	}
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"pool": r.in.Pool})
	m.Timer(MetricScaleUpPodCreated).Record(max(r.obs.AttemptStart.Sub(s.QueuedAt), 0))
	m.Timer(MetricScaleUpRunnerOnline).Record(max(r.obs.OnlineAt.Sub(s.QueuedAt), 0))
}
