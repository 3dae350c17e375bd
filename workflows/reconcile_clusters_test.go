package workflows

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// A runner that left a lost cluster and whose workflow ended before the cluster answered
// again left its Secret and pod there: reconcile lists the named clusters its pools name and
// removes them on that cluster's queue (the pod goes with its Secret).
func TestReconcileCoversNamedClusters(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ReconcileWorkflow, workflow.RegisterOptions{Name: ReconcileWorkflowType})
	scope := Scope{Organization: "acme"}
	runner := RunnerName("cl", "ab12", 1)
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	env.RegisterActivityWithOptions(func(context.Context, ListPoolOwnershipInput) (ListPoolOwnershipResult, error) {
		return ListPoolOwnershipResult{Pools: []PoolOwnership{{Name: "cl", Running: true, Scope: scope, Clusters: []string{"a"}}}}, nil
	}, activity.RegisterOptions{Name: ActivityListPoolOwnership})
	env.RegisterActivityWithOptions(func(context.Context, ListRunnersInput) (ListRunnersResult, error) {
		return ListRunnersResult{}, nil
	}, activity.RegisterOptions{Name: ActivityListRunners})
	env.RegisterActivityWithOptions(func(ctx context.Context, _ ListRunnerObjectsInput) (ListRunnerObjectsResult, error) {
		if activity.GetInfo(ctx).TaskQueue != ClusterTaskQueue("a") {
			return ListRunnerObjectsResult{}, nil
		}
		return ListRunnerObjectsResult{Objects: []RunnerObject{
			{Kind: KindPod, Namespace: "ns", Name: runner, UID: "p", Pool: "cl", Runner: runner, CreatedAt: old, OwnerSecret: runner},
			{Kind: KindSecret, Namespace: "ns", Name: runner, UID: "s", Pool: "cl", Runner: runner, CreatedAt: old},
		}}, nil
	}, activity.RegisterOptions{Name: ActivityListRunnerObjects})
	env.RegisterActivityWithOptions(func(_ context.Context, in FindEndedWorkflowsInput) (FindEndedWorkflowsResult, error) {
		return FindEndedWorkflowsResult{Ended: in.WorkflowIDs}, nil
	}, activity.RegisterOptions{Name: ActivityFindEndedWorkflows})
	var mu sync.Mutex
	var deleted []string
	env.RegisterActivityWithOptions(func(ctx context.Context, in SecretRef) (Nothing, error) {
		mu.Lock()
		defer mu.Unlock()
		deleted = append(deleted, in.Cluster+"@"+activity.GetInfo(ctx).TaskQueue+"/"+in.Name)
		return Nothing{}, nil
	}, activity.RegisterOptions{Name: ActivityDeleteRunnerSecret})
	env.ExecuteWorkflow(ReconcileWorkflowType, ReconcileInput{Namespace: "ns"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var report ReconcileReport
	if err := env.GetWorkflowResult(&report); err != nil {
		t.Fatal(err)
	}
	want := "a@" + ClusterTaskQueue("a") + "/" + runner
	if len(deleted) != 1 || deleted[0] != want {
		t.Errorf("Secrets deleted %v, want %s", deleted, want)
	}
	if len(report.Removed) != 2 || report.Listed.Pods != 1 || report.Listed.Secrets != 1 {
		t.Errorf("report: removed %+v, listed %+v; want the Secret and, with it, the pod", report.Removed, report.Listed)
	}
}

func TestReconcileClustersAreDistinctAndSorted(t *testing.T) {
	got := ReconcileClusters([]PoolOwnership{{Clusters: []string{"b", "a"}}, {}, {Clusters: []string{"a", "c"}}})
	if want := []string{"a", "b", "c"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("ReconcileClusters = %v, want %v", got, want)
	}
}
