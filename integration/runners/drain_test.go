package runners

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// slowJob makes the simulated job long enough for a drain to arrive in the middle of it.
var slowJob = map[string]string{simulator.AnnotationWorkDuration: "6s"}

// TestBusyRunnerDrainedMidJobFinishesItsJob: a persistent runner is running a job when the drain
// update arrives; the job finishes successfully, and only then is the runner unregistered and
// its pod deleted. The test forwards the job events as the webhook starter does.
func TestBusyRunnerDrainedMidJobFinishesItsJob(t *testing.T) {
	s := newScenario(t, "drain")
	startWorker(t, workerapp.Config{WatchNamespace: s.ns})
	c := dialTemporal(t)
	in := s.input(1, false, slowJob)
	runs := s.start(c, in)
	job := s.waitJobRunning(s.queueJobs(1)[0], in.Name)

	id := runs[0].GetID()
	started := workflows.JobSignal{JobID: job.ID, RunnerName: in.Name}
	if err := c.SignalWorkflow(context.Background(), id, "", workflows.SignalJobStarted, started); err != nil {
		t.Fatal(err)
	}
	handle, err := c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateDrain, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.DrainRequest{Reason: "scale-down"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var accepted workflows.DrainResult
	if err := handle.Get(context.Background(), &accepted); err != nil || accepted.State != workflows.RunnerDraining {
		t.Fatalf("drain update = %+v, %v; want accepted as draining", accepted, err)
	}
	if world.GitHub.CallCount("DELETE /orgs/{org}/actions/runners/{runner_id}") != 0 {
		t.Error("the runner was unregistered while its job was running")
	}

	done := s.waitJobDone(job.ID)
	if err := c.SignalWorkflow(context.Background(), id, "", workflows.SignalJobCompleted, started); err != nil {
		t.Fatal(err)
	}
	res := results(t, runs, 2*time.Minute)[0]
	if res.Reason != "drained: scale-down" || res.JobsRun != 1 {
		t.Errorf("result = %+v, want drained after one job", res)
	}
	assertAfterJob(t, c, runs[0], done, workflows.ActivityRemoveRunner)
	s.assertCleanEnd(c, runs)
	if testworld.RecordingHistories() {
		recordHistory(t, id, "runner-persistent-drain")
	}
}

// TestDrainedRunnerNobodyToldIsBusyWaitsForGitHub: the workflow was never told its runner took a
// job (no webhook arrived), so it unregisters at once: GitHub's 422 (RunnerBusy) holds it back
// until the job is over, and the runner is ended (its Secret deleted, the pod with it) only after
// that.
func TestDrainedRunnerNobodyToldIsBusyWaitsForGitHub(t *testing.T) {
	s := newScenario(t, "drain422")
	startWorker(t, workerapp.Config{WatchNamespace: s.ns})
	c := dialTemporal(t)
	in := s.input(1, false, slowJob)
	runs := s.start(c, in)
	job := s.waitJobRunning(s.queueJobs(1)[0], in.Name)
	if err := c.SignalWorkflow(context.Background(), runs[0].GetID(), "", workflows.SignalDrain,
		workflows.DrainRequest{Reason: "rollout"}); err != nil {
		t.Fatal(err)
	}
	res := results(t, runs, 3*time.Minute)[0]
	done, _ := world.GitHub.Job(job.ID)
	if done.Status != githubdouble.StatusCompleted || done.Conclusion != githubdouble.ConclusionSuccess {
		t.Fatalf("job %+v, want completed successfully", done)
	}
	if res.Reason != "drained: rollout" {
		t.Errorf("result = %+v", res)
	}
	busy := world.GitHub.Calls()[githubdouble.CallKey{Route: "DELETE /orgs/{org}/actions/runners/{runner_id}", Status: 422}]
	if busy == 0 {
		t.Errorf("GitHub never answered 422: the drain did not reach the runner mid-job (calls: %s)", githubCallReport())
	}
	assertAfterJob(t, c, runs[0], done, workflows.ActivityDeleteRunnerSecret)
	s.assertCleanEnd(c, runs)
}

// waitJobRunning waits until the named runner runs the job.
func (s *scenario) waitJobRunning(jobID int64, runner string) githubdouble.Job {
	s.t.Helper()
	var job githubdouble.Job
	eventually(s.t, time.Minute, "the job to run", func() bool {
		job, _ = world.GitHub.Job(jobID)
		return job.Status == githubdouble.StatusInProgress
	})
	if job.RunnerName != runner {
		s.t.Fatalf("job runs on %q, want %q", job.RunnerName, runner)
	}
	return job
}

func (s *scenario) waitJobDone(jobID int64) githubdouble.Job {
	s.t.Helper()
	var job githubdouble.Job
	eventually(s.t, time.Minute, "the job to complete", func() bool {
		job, _ = world.GitHub.Job(jobID)
		return job.Status == githubdouble.StatusCompleted
	})
	if job.Conclusion != githubdouble.ConclusionSuccess {
		s.t.Fatalf("job concluded %q, want success", job.Conclusion)
	}
	return job
}

// assertAfterJob checks in the workflow's history that activity was first scheduled only after
// the job completed at GitHub.
func assertAfterJob(t *testing.T, c client.Client, run client.WorkflowRun, job githubdouble.Job, activity string) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		attrs := ev.GetActivityTaskScheduledEventAttributes()
		if attrs == nil || attrs.GetActivityType().GetName() != activity {
			continue
		}
		if at := ev.GetEventTime().AsTime(); at.Before(job.CompletedAt) {
			t.Errorf("%s scheduled at %s, before the job completed at %s", activity, at, job.CompletedAt)
		}
		return
	}
	t.Errorf("%s never scheduled", activity)
}
