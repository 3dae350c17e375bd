package runners

import (
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/kubewrites"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

const runners = 20

// TestEphemeralRunnersEachRunOneJob is the runner lifecycle end to end: 20 ephemeral runners of
// an organization-scoped spec, 20 queued jobs; afterwards nothing is left anywhere, and no
// credential reached a workflow history. It also measures the API cost per runner lifecycle.
func TestEphemeralRunnersEachRunOneJob(t *testing.T) {
	s := newScenario(t, "lc")
	writes := kubewrites.NewCounter()
	startWorker(t, workerapp.Config{Kube: writes.Wrap(world.Kube.Config), WatchNamespace: s.ns})
	c := dialTemporal(t)

	var inputs []workflows.RunnerInput
	for i := range runners {
		inputs = append(inputs, s.input(int64(i+1), true, nil))
	}
	runs := s.start(c, inputs...)
	jobs := s.queueJobs(runners)
	res := results(t, runs, 3*time.Minute)

	for _, r := range res {
		if r.FinalState != workflows.RunnerDone || r.RunnerID == 0 || r.Reason != "pod succeeded" {
			t.Errorf("runner %s ended %+v, want done after its pod succeeded", r.Name, r)
		}
	}
	ranBy := map[string]bool{}
	for _, id := range jobs {
		j, _ := world.GitHub.Job(id)
		if j.Status != githubdouble.StatusCompleted || j.Conclusion != githubdouble.ConclusionSuccess || ranBy[j.RunnerName] {
			t.Errorf("job %d: %s/%s by %q, want each job completed successfully by its own runner", id, j.Status, j.Conclusion, j.RunnerName)
		}
		ranBy[j.RunnerName] = true
	}
	s.assertCleanEnd(c, runs)
	assertNoCredentialInHistory(t, c, runs)

	calls := world.GitHub.TotalCalls()
	t.Logf("GitHub API calls: %d for %d runner lifecycles (%.2f each): %s", calls, runners, float64(calls)/runners, githubCallReport())
	t.Logf("Kubernetes writes by the worker: %d for %d runner lifecycles (%.2f each): %s", writes.Total(), runners,
		float64(writes.Total())/runners, writes)
	if n := world.GitHub.CallCount("POST /orgs/{org}/actions/runners/generate-jitconfig"); n != runners {
		t.Errorf("%d JIT registrations for %d runners", n, runners)
	}
	if testworld.RecordingHistories() {
		recordHistory(t, runs[0].GetID(), "runner-ephemeral")
	}
}

// recordHistory exports a runner's history for the replay test in workflows/testdata.
func recordHistory(t *testing.T, workflowID, name string) {
	t.Helper()
	path, err := world.Temporal.RecordHistory(workflowID, "", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", path)
}
