package runners

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestEnterpriseRunnersRegisterRunAndLeave: enterprise-scope runners in both registration modes,
// with the classic token the worker runs with. An ephemeral runner registers by JIT
// configuration, runs one job of a repository of an organization in the enterprise and leaves;
// a persistent runner registers itself with an enterprise registration token, runs a job, and
// is drained and unregistered. Afterwards nothing is left: no registration at GitHub, no pod, no
// Secret. (An App installation's refusal is tested in activities: GitHub's enterprise runner
// endpoints do not take App tokens.)
func TestEnterpriseRunnersRegisterRunAndLeave(t *testing.T) {
	s := newEnterpriseScenario(t, "ent")
	startWorker(t, workerapp.Config{WatchNamespace: s.ns})
	c := dialTemporal(t)

	// Each runner has a label of its own and each job asks for one, so the persistent runner
	// (online after its first job) cannot take both jobs and leave the JIT runner without one.
	jit, persistent := s.enterpriseInput(1, true), s.enterpriseInput(2, false)
	jit.Spec.Labels = slices.Concat(runnerLabels, []string{"ent-jit"})
	persistent.Spec.Labels = slices.Concat(runnerLabels, []string{"ent-token"})
	runs := s.start(c, jit, persistent)
	var jobs []int64
	for _, own := range []string{"ent-jit", "ent-token"} {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: s.org + "/app", Labels: slices.Concat(runnerLabels, []string{own})})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j.ID)
	}
	done := map[string]bool{}
	for _, id := range jobs {
		done[s.waitJobDone(id).RunnerName] = true
	}
	if !done[jit.Name] || !done[persistent.Name] {
		t.Fatalf("jobs ran on %v, want one on each of %s and %s", done, jit.Name, persistent.Name)
	}
	if err := c.SignalWorkflow(context.Background(), runs[1].GetID(), "", workflows.SignalDrain,
		workflows.DrainRequest{Reason: "test over"}); err != nil {
		t.Fatal(err)
	}
	res := results(t, runs, 2*time.Minute)
	if res[0].FinalState != workflows.RunnerDone || res[0].Reason != "pod succeeded" {
		t.Errorf("JIT runner ended %+v, want done after its pod succeeded", res[0])
	}
	if res[1].FinalState != workflows.RunnerDone || res[1].Reason != "drained: test over" {
		t.Errorf("persistent runner ended %+v, want done after the drain", res[1])
	}
	for route, want := range map[string]int{
		"POST /enterprises/{enterprise}/actions/runners/generate-jitconfig": 1,
		"POST /enterprises/{enterprise}/actions/runners/registration-token": 1,
	} {
		if n := world.GitHub.CallCount(route); n != want {
			t.Errorf("%s called %d times, want %d (calls: %s)", route, n, want, githubCallReport())
		}
	}
	if world.GitHub.CallCount("DELETE /enterprises/{enterprise}/actions/runners/{runner_id}") == 0 {
		t.Errorf("the persistent runner was never unregistered from the enterprise (calls: %s)", githubCallReport())
	}
	s.assertCleanEnd(c, runs)
	var left []githubdouble.Runner
	for _, r := range world.GitHub.Runners() {
		if r.Scope == githubdouble.EnterpriseScope(s.enterprise) {
			left = append(left, r)
		}
	}
	if len(left) != 0 {
		t.Errorf("enterprise runners left at GitHub: %+v", left)
	}
}

// enterpriseScenario is a scenario whose organization belongs to an enterprise, and whose
// runners register for the whole enterprise.
type enterpriseScenario struct {
	*scenario
	enterprise string
}

func newEnterpriseScenario(t *testing.T, pool string) *enterpriseScenario {
	t.Helper()
	s := &enterpriseScenario{
		scenario:   &scenario{t: t, pool: pool, org: "org-" + pool, ns: world.Kube.NewNamespace(t)},
		enterprise: "enterprise-" + pool,
	}
	if err := world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: s.org + "/app", Enterprise: s.enterprise}); err != nil {
		t.Fatal(err)
	}
	world.GitHub.ResetCalls()
	return s
}

// enterpriseInput is runner seq's input with the enterprise scope: JIT mode when ephemeral,
// registration-token mode when persistent (the defaults).
func (s *enterpriseScenario) enterpriseInput(seq int64, ephemeral bool) workflows.RunnerInput {
	in := s.input(seq, ephemeral, nil)
	in.Spec.Scope = workflows.Scope{Enterprise: s.enterprise}
	return in
}
