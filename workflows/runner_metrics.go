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

// noteOnline records evidence, seen at now, that the runner is online. A job's started_at
// (GitHub's clock) is earlier evidence than the notice carrying it, so it counts when given;
// the earliest evidence wins, never before the pod existed nor after it was seen.
func (o *RunnerObservations) noteOnline(now, startedAt time.Time) {
	if !o.Online {
		return
	}
	at := now
	if !startedAt.IsZero() && startedAt.Before(now) {
		at = startedAt
	}
	if at.Before(o.PodCreatedAt) {
		at = o.PodCreatedAt
	}
	if o.OnlineAt.IsZero() || at.Before(o.OnlineAt) {
		o.OnlineAt = at
	}
}

// isNewJob reports whether a job-started notice is about a job this runner has not started
// or finished yet (GitHub and people redeliver).
func (o *RunnerObservations) isNewJob(s JobSignal) bool {
	return s.JobID != 0 && s.JobID != o.JobID && !slices.Contains(o.RecentJobs, s.JobID)
}

// recordScaleUpLatency records how long after the job was queued this runner's pod was
// created and the runner was online. A runner that was there before the job was queued (warm,
// persistent) records zero: the job waited for no scale-up. GitHub's times have whole
// seconds, so a latency can read up to a second long.
func (r *runner) recordScaleUpLatency(ctx workflow.Context, s JobSignal) {
	if s.QueuedAt.IsZero() || r.obs.PodCreatedAt.IsZero() || r.obs.OnlineAt.IsZero() {
		return
	}
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"pool": r.in.Pool})
	m.Timer(MetricScaleUpPodCreated).Record(max(r.obs.PodCreatedAt.Sub(s.QueuedAt), 0))
	m.Timer(MetricScaleUpRunnerOnline).Record(max(r.obs.OnlineAt.Sub(s.QueuedAt), 0))
}
