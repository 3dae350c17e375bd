package runners

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/workflows"
)

const testDeployment = "runnerflow-test"

// TestVersionedRunnerStaysOnTheBuildThatStartedIt: with Worker Versioning (--build-id), build v1
// starts a persistent runner that runs a job; then build v2 is deployed next to it and made
// current. The v1 runner's drain, after the switch, is still handled by v1 (runner workflows are
// pinned), while a runner started after the switch runs entirely on v2.
func TestVersionedRunnerStaysOnTheBuildThatStartedIt(t *testing.T) {
	s := newScenario(t, "vers")
	c := dialTemporal(t)
	// Registered first, so it runs last: the tests after this one run unversioned workers.
	t.Cleanup(func() { setCurrentBuild(t, c, "") })
	startWorker(t, versionedWorker(s, "v1"))
	setCurrentBuild(t, c, "v1")
	old := s.start(c, s.input(1, false, nil))
	s.waitJobDone(s.queueJobs(1)[0])

	startWorker(t, versionedWorker(s, "v2"))
	setCurrentBuild(t, c, "v2")
	if err := c.SignalWorkflow(context.Background(), old[0].GetID(), "", workflows.SignalDrain,
		workflows.DrainRequest{Reason: "upgraded"}); err != nil {
		t.Fatal(err)
	}
	if res := results(t, old, 2*time.Minute)[0]; res.Reason != "drained: upgraded" {
		t.Errorf("old runner ended %+v, want drained", res)
	}
	fresh := s.start(c, s.input(2, true, nil))
	s.waitJobDone(s.queueJobs(1)[0])
	results(t, fresh, 2*time.Minute)

	if got := taskWorkers(t, c, old[0]); len(got) != 1 || !got["worker-v1"] {
		t.Errorf("the v1 runner's workflow tasks ran on %v, want only worker-v1", got)
	}
	if got := taskWorkers(t, c, fresh[0]); len(got) != 1 || !got["worker-v2"] {
		t.Errorf("the runner started after the switch ran on %v, want only worker-v2", got)
	}
	s.assertCleanEnd(c, append(old, fresh...))
}

func versionedWorker(s *scenario, build string) workerapp.Config {
	return workerapp.Config{
		WatchNamespace: s.ns, Identity: "worker-" + build,
		Deployment: worker.WorkerDeploymentVersion{DeploymentName: testDeployment, BuildID: build},
	}
}

// setCurrentBuild makes build the deployment's current version ("" : unversioned workers), as
// `temporal worker deployment set-current-version` does; a version is known to the server only
// once its workers poll, hence the retries.
func setCurrentBuild(t *testing.T, c client.Client, build string) {
	t.Helper()
	h := c.WorkerDeploymentClient().GetHandle(testDeployment)
	eventually(t, 30*time.Second, "build "+build+" to become current", func() bool {
		_, err := h.SetCurrentVersion(context.Background(), client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
		return err == nil
	})
}

// taskWorkers are the identities of the workers that completed the run's workflow tasks.
func taskWorkers(t *testing.T, c client.Client, run client.WorkflowRun) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if attrs := ev.GetWorkflowTaskCompletedEventAttributes(); attrs != nil {
			out[attrs.GetIdentity()] = true
		}
	}
	return out
}
