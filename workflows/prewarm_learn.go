package workflows

import (
	"slices"
	"strings"
	"time"
)

// What a prewarming pool learns from the runs it hears of, and carries across
// continue-as-new: each workflow's jobs' recent run times (what Predict reads) and its own
// start latency (how long before a predicted job its runners start).

// history is the recent run times of the run's workflow's jobs.
func (st PrewarmState) history(r PrewarmRun) []JobDurations {
	i := slices.IndexFunc(st.Durations, func(d WorkflowDurations) bool { return d.Workflow == r.workflowKey() })
	if i < 0 {
		return nil
	}
	return st.Durations[i].Jobs
}

// recordDurations records the run time of every successful job of a run whose graph is known
// and whose run time is not recorded yet, under the file's job id. Failed and cancelled jobs
// end early and say little of how long the job takes; a job whose name maps to no job of the
// file is left out.
func (st *PrewarmState) recordDurations() {
	for ri := range st.Runs {
		run := &st.Runs[ri]
		if run.Graph == nil {
			continue
		}
		for ji := range run.Jobs {
			j := &run.Jobs[ji]
			if j.Recorded || j.Completed.IsZero() {
				continue
			}
			j.Recorded = true
			id, ok := graphJobOf(*run.Graph, j.Name)
			if !ok || j.Conclusion != "success" || j.Started.IsZero() || j.Completed.Before(j.Started) {
				continue
			}
			st.record(run.workflowKey(), id, j.Completed.Sub(j.Started), j.Completed)
		}
	}
}

// record adds one run time, within the bounds: PrewarmJobsKept jobs a workflow,
// PrewarmWorkflowsKept workflows (the least recently run forgotten first).
func (st *PrewarmState) record(workflow, jobID string, took time.Duration, at time.Time) {
	i := slices.IndexFunc(st.Durations, func(d WorkflowDurations) bool { return d.Workflow == workflow })
	if i < 0 {
		if len(st.Durations) >= PrewarmWorkflowsKept {
			oldest := 0
			for k, d := range st.Durations {
				if d.LastRun.Before(st.Durations[oldest].LastRun) {
					oldest = k
				}
			}
			st.Durations = slices.Delete(st.Durations, oldest, oldest+1)
		}
		st.Durations = append(st.Durations, WorkflowDurations{Workflow: workflow})
		i = len(st.Durations) - 1
	}
	d := &st.Durations[i]
	known := slices.ContainsFunc(d.Jobs, func(h JobDurations) bool { return strings.EqualFold(h.JobID, jobID) })
	if !known && len(d.Jobs) >= PrewarmJobsKept {
		return
	}
	d.Jobs = RecordJobDuration(d.Jobs, jobID, took, PrewarmDurationsKept)
	d.LastRun = latest(d.LastRun, at)
}

// RecordStartLatency adds one measured start (the pool deciding to start a runner → the
// runner online) to the state, keeping the newest PrewarmLatenciesKept. The state given is not
// modified.
func RecordStartLatency(st PrewarmState, took time.Duration) PrewarmState {
	latencies := append(slices.Clone(st.StartLatencies), max(took, 0))
	st.StartLatencies = latencies[max(len(latencies)-PrewarmLatenciesKept, 0):]
	return st
}

// StartLatency is how long before a job is due its runners start: PrewarmLatencyQuantile of
// the pool's measured starts, by nearest rank, once it has PrewarmLatenciesMin of them;
// PrewarmStartLatency until then.
func StartLatency(measured []time.Duration) time.Duration {
	if len(measured) < PrewarmLatenciesMin {
		return PrewarmStartLatency
	}
	took, _ := durationQuantile(measured, PredictPolicy{Quantile: PrewarmLatencyQuantile, Kept: PrewarmLatenciesKept})
	return took
}
