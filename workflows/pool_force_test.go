package workflows

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// force-remove-runner forwards to the pool's own runner; the removed runner holds its place
// while it leaves (no replacement started, though the pool wants one runner), and is replaced
// once it has ended.
func TestPoolForceRemoveRunnerWaitsForTheRunnerToEnd(t *testing.T) {
	for _, canAfter := range []int{0, 3} {
		h := newPoolHarness(t, canAfter)
		h.forceRemoveTakes = 5 * time.Minute
		spec := poolTestSpec()
		spec.MaxReplicas = ptr(1) // the removed runner, once not busy, would leave room for another
		first := RunnerName("linux", Generation(""), 1)
		h.at(time.Minute, func() { h.startJobsWithIDs(41) })
		h.at(2*time.Minute, func() {
			h.update("unknown", UpdateForceRemoveRunner, ForceRemoveRunnerRequest{Runner: "linux-zzzz-9", Reason: "stuck"})
		})
		h.at(2*time.Minute+time.Second, func() { h.update("no reason", UpdateForceRemoveRunner, ForceRemoveRunnerRequest{Runner: first}) })
		h.at(2*time.Minute+2*time.Second, func() {
			h.update("force", UpdateForceRemoveRunner, ForceRemoveRunnerRequest{Runner: first, Reason: "job stuck"})
		})
		h.check(6*time.Minute, "no replacement while the removed runner is leaving", func(st PoolStatus) bool {
			return st.Totals.Started == 1 && len(st.Runners) == 1 && st.Runners[0].Removing &&
				st.Runners[0].State == RunnerDraining
		})
		end := h.run(spec, 10*time.Minute)
		if o, _ := h.outcome("unknown"); o.rejected == nil || !strings.Contains(o.rejected.Error(), "has no runner") {
			t.Errorf("unknown runner: %+v, want rejected", o)
		}
		if o, _ := h.outcome("no reason"); o.rejected == nil || !strings.Contains(o.rejected.Error(), "a reason is required") {
			t.Errorf("no reason: %+v, want rejected", o)
		}
		if o, _ := h.outcome("force"); o.rejected != nil || o.failed != nil {
			t.Errorf("force: %+v, want accepted", o)
		}
		if end.Totals.Started != 2 || len(end.Runners) != 1 || end.Runners[0].Name == first {
			t.Errorf("[can %d] runners %s, totals %+v; want the removed runner replaced after it ended", canAfter, describeRunners(end), end.Totals)
		}
		if len(end.Finished) != 1 || end.Finished[0].Reason != "force-removed: job stuck" {
			t.Errorf("[can %d] finished %+v, want the operator's reason", canAfter, end.Finished)
		}
	}
}

// A force-removed runner holds its place and its slot, but is not kept against a scale-down
// of the others.
func TestDecideForceRemovedRunnerHoldsItsPlace(t *testing.T) {
	removing := decRunner(1, RunnerDraining, decHashNew)
	removing.Removing = true
	if p := Decide(decWith(decIn(1, 5, removing), func(d *DecideInput) { d.LastDesired = 1 })); len(p.Start) != 0 {
		t.Errorf("started %d while the removed runner leaves; why %q", len(p.Start), p.Why)
	}
	stateful := removing
	stateful.Stateful, stateful.Slot = true, 0
	if p := Decide(decWith(decIn(2, 2, stateful), func(d *DecideInput) { d.Stateful, d.LastDesired = true, 2 })); len(p.Start) != 1 || p.Start[0].Slot != 1 {
		t.Errorf("stateful starts %+v, want one, into slot 1 only", p.Start)
	}
	idle := decRunner(2, RunnerIdle, decHashNew)
	if p := Decide(decWith(decIn(1, 5, removing, idle), func(d *DecideInput) { d.LastDesired = 1 })); len(p.Drain) != 0 || len(p.Start) != 0 {
		t.Errorf("plan %+v, want the idle runner kept and nothing started", p)
	}
}

// A repository-scoped pool cannot name a runner group (GitHub has none for repositories): the
// newer rule is in ValidateNew, not in the Validate a running pool's start replays.
func TestValidateNewRejectsRunnerGroupOnRepository(t *testing.T) {
	spec := poolTestSpec()
	spec.Organization, spec.Repository, spec.RunnerGroup = "", "acme/app", "builders"
	if errs := spec.Validate(field.NewPath("spec")); len(errs) != 0 {
		t.Fatalf("Validate: %v, want the replayed rules unchanged", errs)
	}
	errs := spec.ValidateNew(field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Field != "spec.runnerGroup" {
		t.Errorf("ValidateNew: %v, want spec.runnerGroup", errs)
	}
	spec.Repository, spec.Organization = "", "acme"
	if errs := spec.ValidateNew(field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("organization with a group: %v, want valid", errs)
	}
}

// The apply update rejects a repository-scoped pool with a runner group, with the field path.
func TestPoolApplyRejectsRunnerGroupOnRepository(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.Organization, spec.Repository = "", "acme/app"
	bad := spec
	bad.RunnerGroup = "builders"
	h.at(time.Minute, func() { h.update("group", UpdateApply, ApplyRequest{Spec: bad}) })
	end := h.run(spec, 2*time.Minute)
	if o, _ := h.outcome("group"); o.rejected == nil || !strings.Contains(o.rejected.Error(), "spec.runnerGroup") {
		t.Errorf("apply: %+v, want rejected at spec.runnerGroup", o)
	}
	if end.Spec.RunnerGroup != "" {
		t.Errorf("spec runner group = %q, want unchanged", end.Spec.RunnerGroup)
	}
}

// A new pool's start checks the newer rules too (behind the new-spec-rules change id).
func TestNewPoolWithRunnerGroupOnRepositoryFails(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(PoolWorkflow, workflow.RegisterOptions{Name: PoolWorkflowType})
	spec := poolTestSpec()
	spec.Organization, spec.Repository, spec.RunnerGroup = "", "acme/app", "builders"
	env.ExecuteWorkflow(PoolWorkflowType, PoolInput{Spec: spec})
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "spec.runnerGroup") {
		t.Errorf("pool start: %v, want rejected at spec.runnerGroup", err)
	}
}
