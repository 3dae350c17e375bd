package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// warmReconcileEnv is a reconcile run over one closed pool ("gone", scope org:acme): GitHub
// lists none of its runners, every runner workflow asked about has ended; the tests say what
// the Kubernetes listings find.
func warmReconcileEnv(t *testing.T, now time.Time) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(now)
	env.RegisterWorkflowWithOptions(ReconcileWorkflow, workflow.RegisterOptions{Name: ReconcileWorkflowType})
	env.RegisterActivityWithOptions(func(context.Context, ListPoolOwnershipInput) (ListPoolOwnershipResult, error) {
		return ListPoolOwnershipResult{Pools: []PoolOwnership{{Name: "gone", Scope: Scope{Organization: "acme"}}}}, nil
	}, activity.RegisterOptions{Name: ActivityListPoolOwnership})
	env.RegisterActivityWithOptions(func(context.Context, ListRunnersInput) (ListRunnersResult, error) {
		return ListRunnersResult{}, nil
	}, activity.RegisterOptions{Name: ActivityListRunners})
	env.RegisterActivityWithOptions(func(context.Context, ListRunnerObjectsInput) (ListRunnerObjectsResult, error) {
		return ListRunnerObjectsResult{}, nil
	}, activity.RegisterOptions{Name: ActivityListRunnerObjects})
	env.RegisterActivityWithOptions(func(_ context.Context, in FindEndedWorkflowsInput) (FindEndedWorkflowsResult, error) {
		return FindEndedWorkflowsResult{Ended: in.WorkflowIDs}, nil
	}, activity.RegisterOptions{Name: ActivityFindEndedWorkflows})
	env.RegisterActivityWithOptions(func(context.Context, SecretRef) (Nothing, error) { return Nothing{}, nil },
		activity.RegisterOptions{Name: ActivityDeleteRunnerSecret})
	return env
}

// A run whose warm namespace is not the namespace it watches lists the warm namespace's
// Secrets (Secrets only: the worker may not list pods there) and removes a warm registration's
// Secret whose pool is gone, in the warm namespace.
func TestReconcileRemovesOrphanedWarmSecretsInTheWarmNamespace(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	env := warmReconcileEnv(t, now)
	name := RunnerName("gone", "beef", 1)
	env.OnActivity(ActivityListRunnerObjects, mock.Anything, ListRunnerObjectsInput{Namespace: "runners"}).
		Return(ListRunnerObjectsResult{}, nil).Once()
	env.OnActivity(ActivityListRunnerObjects, mock.Anything, ListRunnerObjectsInput{Namespace: "runners-warm", Kinds: []OrphanKind{KindSecret}}).
		Return(ListRunnerObjectsResult{Objects: []RunnerObject{{Kind: KindSecret, Namespace: "runners-warm", Name: name, UID: "u1",
			Pool: "gone", Runner: name, WorkflowID: RunnerWorkflowID("gone", name), CreatedAt: now.Add(-time.Hour)}}}, nil).Once()
	env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: "runners-warm", Name: name}).
		Return(Nothing{}, nil).Once()
	env.ExecuteWorkflow(ReconcileWorkflowType, ReconcileInput{Namespace: "runners", WarmNamespace: "runners-warm"})
	var report ReconcileReport
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&report); err != nil {
		t.Fatal(err)
	}
	env.AssertExpectations(t)
	if len(report.Removed) != 1 || report.Removed[0].Namespace != "runners-warm" || report.Removed[0].Name != name || report.Listed.Secrets != 1 {
		t.Errorf("report %+v; want the warm Secret %s listed and removed in runners-warm", report, name)
	}
}

// A run whose warm namespace is the one it watches, or that watches every namespace, lists
// once: the warm Secrets are in that listing already.
func TestReconcileListsTheWarmNamespaceOnlyWhenApart(t *testing.T) {
	for _, in := range []ReconcileInput{
		{Namespace: "runners-warm", WarmNamespace: "runners-warm"},
		{WarmNamespace: "runners-warm"},
		{Namespace: "runners"},
	} {
		env := warmReconcileEnv(t, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
		env.OnActivity(ActivityListRunnerObjects, mock.Anything, ListRunnerObjectsInput{Namespace: in.Namespace}).
			Return(ListRunnerObjectsResult{}, nil).Once()
		env.ExecuteWorkflow(ReconcileWorkflowType, in)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		env.AssertExpectations(t)
	}
}
