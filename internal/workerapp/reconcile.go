package workerapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// ReconcileConfig is the reconcile Schedule the worker keeps: every worker replica makes sure at
// start-up that the Schedule workflows.ReconcileScheduleID exists with this interval and input
// (create it if missing, update it if it differs, leave it alone if not), so a platform team gets
// reconciliation with no step of its own. An operator's pause (`temporal schedule toggle
// --pause`) is kept: the worker never changes the Schedule's state.
type ReconcileConfig struct {
	// Interval between runs; zero means workflows.DefaultReconcileInterval.
	Interval time.Duration
	// DryRun makes every scheduled run report what it would remove and remove nothing.
	DryRun bool
	// Grace overrides workflows.ReconcileGrace (tests); zero keeps it.
	Grace time.Duration
	// Hook is the webhook whose failed deliveries every run redelivers, each at most once; zero
	// redelivers nothing.
	Hook workflows.HookRef
	// WarmNamespace is the worker's warm namespace, listed by every run besides the watched
	// one; the worker sets it from its own (Config.WarmNamespace), tests as they need.
	WarmNamespace string
}

// reconcileScheduleTimeout bounds the start-up check: a worker whose Temporal is slow starts
// anyway, and its next start checks again.
const reconcileScheduleTimeout = 10 * time.Second

// input is the input every scheduled run gets.
func (r ReconcileConfig) input(watchNamespace string) workflows.ReconcileInput {
	return workflows.ReconcileInput{DryRun: r.DryRun, Namespace: watchNamespace, WarmNamespace: r.WarmNamespace, Grace: r.Grace, Hook: r.Hook}
}

func (r ReconcileConfig) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return workflows.DefaultReconcileInterval
}

// EnsureReconcileSchedule creates the reconcile Schedule, or updates its interval, action and
// policies when they differ from cfg; it reports what it did ("created", "updated" or
// "unchanged"). A Schedule created meanwhile by another replica is then compared like any.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, cfg ReconcileConfig, watchNamespace string) (string, error) {
	want := reconcileSchedule(cfg, watchNamespace)
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID: workflows.ReconcileScheduleID, Spec: *want.Spec, Action: want.Action,
		Overlap: want.Policy.Overlap, CatchupWindow: want.Policy.CatchupWindow,
		Note: "runnerflow: removes what runner workflows left behind and redelivers failed webhook deliveries (docs/operations.md, Orphans)",
	})
	if err == nil {
		return "created", nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return "", fmt.Errorf("create schedule %s: %w", workflows.ReconcileScheduleID, err)
	}
	result := "unchanged"
	err = c.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			have := in.Description.Schedule
			if sameReconcileSchedule(have, want) {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			result = "updated"
			have.Spec, have.Action, have.Policy = want.Spec, want.Action, want.Policy // State (a pause) is kept
			return &client.ScheduleUpdate{Schedule: &have}, nil
		},
	})
	if err != nil {
		return "", fmt.Errorf("update schedule %s: %w", workflows.ReconcileScheduleID, err)
	}
	return result, nil
}

// reconcileSchedule is the Schedule as cfg wants it.
func reconcileSchedule(cfg ReconcileConfig, watchNamespace string) client.Schedule {
	return client.Schedule{
		Spec: &client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.interval()}}},
		Action: &client.ScheduleWorkflowAction{
			ID: workflows.ReconcileWorkflowID, Workflow: workflows.ReconcileWorkflowType,
			Args: []any{cfg.input(watchNamespace)}, TaskQueue: workflows.DecisionTaskQueue,
			WorkflowExecutionTimeout: workflows.ReconcileRunTimeout,
		},
		Policy: &client.SchedulePolicies{Overlap: workflows.ReconcileOverlap, CatchupWindow: workflows.ReconcileCatchupWindow},
	}
}

// sameReconcileSchedule compares what the worker manages: the interval, the workflow it starts
// with its input and timeout, and the overlap and catch-up policies.
func sameReconcileSchedule(have, want client.Schedule) bool {
	if have.Spec == nil || len(have.Spec.Intervals) != 1 || len(have.Spec.Calendars) > 0 || len(have.Spec.CronExpressions) > 0 ||
		have.Spec.Intervals[0] != want.Spec.Intervals[0] {
		return false
	}
	if have.Policy == nil || have.Policy.Overlap != want.Policy.Overlap || have.Policy.CatchupWindow != want.Policy.CatchupWindow {
		return false
	}
	a, ok := have.Action.(*client.ScheduleWorkflowAction)
	w := want.Action.(*client.ScheduleWorkflowAction)
	if !ok || a.ID != w.ID || a.Workflow != w.Workflow || a.TaskQueue != w.TaskQueue ||
		a.WorkflowExecutionTimeout != w.WorkflowExecutionTimeout || len(a.Args) != 1 {
		return false
	}
	payload, ok := a.Args[0].(*commonpb.Payload)
	var in workflows.ReconcileInput
	if !ok || converter.GetDefaultDataConverter().FromPayload(payload, &in) != nil {
		return false
	}
	return in == w.Args[0].(workflows.ReconcileInput)
}

// ensureReconcileSchedule is the start-up check: a failure is logged, never fatal (the worker's
// runners matter more than its housekeeping).
func (a *App) ensureReconcileSchedule(ctx context.Context) {
	if a.cfg.Reconcile == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, reconcileScheduleTimeout)
	defer cancel()
	cfg := *a.cfg.Reconcile
	if cfg.WarmNamespace == "" {
		cfg.WarmNamespace = a.warmNS
	}
	result, err := EnsureReconcileSchedule(ctx, a.temporal, cfg, a.cfg.WatchNamespace)
	if err != nil {
		a.log.Error("Reconcile schedule not ensured; the next worker start tries again", "schedule", workflows.ReconcileScheduleID, "error", err)
		return
	}
	a.log.Info("Reconcile schedule", "schedule", workflows.ReconcileScheduleID, "result", result,
		"interval", a.cfg.Reconcile.interval(), "dryRun", a.cfg.Reconcile.DryRun, "hook", a.cfg.Reconcile.Hook.String())
}
