package pools

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// A runner busy with a long job is force-removed with the `temporal` CLI through its pool: the
// request needs a reason; the runner ends with it; GitHub (the double) marks the job failed
// when the runner goes; the pool starts no other runner until the removed one has ended; and
// nothing of it is left: no pod, no Secret, no registration. The replacement is then
// force-removed with the runner's own update, through the SDK client.
func TestForceRemoveBusyRunner(t *testing.T) {
	p := newPoolTest(t, "force")
	p.apply(p.spec(1, 1, "30m"))
	id := workflows.PoolWorkflowID(p.name)
	jobs := p.queueJobs(1)
	st := p.eventually(wait, "a busy runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerBusy, "") == 1 })
	victim := st.Runners[0].Name

	out, ok := temporalCLI(t, "workflow", "update", "execute", "--workflow-id", id, "--name", workflows.UpdateForceRemoveRunner,
		"--input", `{"runner":"`+victim+`"}`)
	if ok || !strings.Contains(out, "a reason is required") {
		t.Errorf("force-remove without a reason: ok=%v, output:\n%s\nwant a rejection that says why", ok, out)
	}
	mustCLI(t, "workflow", "update", "execute", "--workflow-id", id, "--name", workflows.UpdateForceRemoveRunner,
		"--input", `{"runner":"`+victim+`","reason":"job stuck"}`)

	// Until the removed runner has ended, it is the pool's only runner.
	deadline := time.Now().Add(wait)
	leaving := 0
	for {
		st := p.status()
		if !slices.ContainsFunc(st.Runners, func(r workflows.PoolRunner) bool { return r.Name == victim }) {
			break
		}
		if st.Totals.Started != 1 || len(st.Runners) > 1 {
			t.Fatalf("a runner started while the removed one was leaving: runners %v, totals %+v", runnerStates(st), st.Totals)
		}
		if st.Runners[0].Removing {
			leaving++
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed runner did not end within %s: %v", wait, runnerStates(st))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if leaving == 0 {
		t.Error("the removed runner was never seen leaving (removing) in the pool's status")
	}
	var res workflows.RunnerResult
	if err := p.c.GetWorkflow(p.ctx, workflows.RunnerWorkflowID(p.name, victim), "").Get(p.ctx, &res); err != nil {
		t.Fatalf("removed runner's workflow: %v", err)
	}
	if res.FinalState != workflows.RunnerDone || res.Reason != "force-removed: job stuck" {
		t.Errorf("removed runner ended %+v, want done with the operator's reason", res)
	}
	if job, ok := world.GitHub.Job(jobs[0]); !ok || job.Status != githubdouble.StatusCompleted || job.Conclusion != githubdouble.ConclusionFailure {
		t.Errorf("the job of the removed runner: %+v (found %v), want completed with failure", job, ok)
	}
	p.checkNothingLeftOf(victim)

	// The replacement starts once the removed runner has ended; it is force-removed by its own
	// update, which also needs a reason.
	st = p.eventually(wait, "a replacement runner online", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, "") == 1 && st.Runners[0].Name != victim
	})
	next := st.Runners[0].Name
	if err := p.forceRemoveRunner(next, ""); err == nil || !strings.Contains(err.Error(), "a reason is required") {
		t.Errorf("runner force-remove without a reason: %v, want rejected", err)
	}
	if err := p.forceRemoveRunner(next, "testing"); err != nil {
		t.Fatalf("runner force-remove: %v", err)
	}
	if err := p.c.GetWorkflow(p.ctx, workflows.RunnerWorkflowID(p.name, next), "").Get(p.ctx, &res); err != nil {
		t.Fatalf("second removed runner's workflow: %v", err)
	}
	if res.Reason != "force-removed: testing" {
		t.Errorf("second removed runner ended %+v, want the operator's reason", res)
	}
	p.checkNothingLeftOf(next)
}

// forceRemoveRunner sends the runner's own force-remove update and waits for its answer.
func (p *poolTest) forceRemoveRunner(name, reason string) error {
	h, err := p.c.UpdateWorkflow(p.ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.RunnerWorkflowID(p.name, name), UpdateName: workflows.UpdateForceRemove,
		Args: []any{workflows.ForceRemoveRequest{Reason: reason}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(p.ctx, nil)
}

// checkNothingLeftOf checks that the runner has no pod, no Secret and no registration at GitHub.
func (p *poolTest) checkNothingLeftOf(name string) {
	p.t.Helper()
	waitFor(p.t, wait, "the removed runner's pod gone", func() bool {
		_, err := world.Kubernetes.CoreV1().Pods(p.ns).Get(p.ctx, name, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found")
	})
	for _, s := range p.poolSecrets() {
		if s.Name == name {
			p.t.Errorf("the removed runner's Secret %s is still there", name)
		}
	}
	for _, r := range p.githubRunners() {
		if r.Name == name {
			p.t.Errorf("the removed runner is still registered at GitHub: %+v", r)
		}
	}
}
