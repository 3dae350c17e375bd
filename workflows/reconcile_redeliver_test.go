package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// redeliverEnv is a reconcile run with a hook in a test environment: no pools and nothing to
// remove, the hook's listing as given.
func redeliverEnv(t *testing.T, listed ListHookDeliveriesResult) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ReconcileWorkflow, workflow.RegisterOptions{Name: ReconcileWorkflowType})
	env.RegisterActivityWithOptions(func(context.Context, ListPoolOwnershipInput) (ListPoolOwnershipResult, error) {
		return ListPoolOwnershipResult{}, nil
	}, activity.RegisterOptions{Name: ActivityListPoolOwnership})
	env.RegisterActivityWithOptions(func(context.Context, ListRunnerObjectsInput) (ListRunnerObjectsResult, error) {
		return ListRunnerObjectsResult{}, nil
	}, activity.RegisterOptions{Name: ActivityListRunnerObjects})
	env.RegisterActivityWithOptions(func(context.Context, ListHookDeliveriesInput) (ListHookDeliveriesResult, error) {
		return listed, nil
	}, activity.RegisterOptions{Name: ActivityListHookDeliveries})
	env.RegisterActivityWithOptions(func(context.Context, RedeliverHookDeliveryInput) (RedeliverHookDeliveryResult, error) {
		return RedeliverHookDeliveryResult{}, nil
	}, activity.RegisterOptions{Name: ActivityRedeliverHookDelivery})
	return env
}

func runReconcile(t *testing.T, env *testsuite.TestWorkflowEnvironment, in ReconcileInput) ReconcileReport {
	t.Helper()
	env.ExecuteWorkflow(ReconcileWorkflowType, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var report ReconcileReport
	if err := env.GetWorkflowResult(&report); err != nil {
		t.Fatal(err)
	}
	env.AssertExpectations(t)
	if report.Deliveries == nil {
		t.Fatalf("a run with a hook reports no redelivery: %+v", report)
	}
	return report
}

var testHook = HookRef{Organization: "acme", ID: 12}

// failedListing: three failed workflow_job events, "a" redelivered by hand already; the hook's
// newest answer a success.
func failedListing(now time.Time) ListHookDeliveriesResult {
	ev := func(guid string, id int64, redelivered bool) FailedEvent {
		return FailedEvent{GUID: guid, Event: EventWorkflowJob, Action: "queued", DeliveryID: id, FailedAt: now.Add(-time.Minute), Redelivered: redelivered}
	}
	return ListHookDeliveriesResult{Pages: 1, DeliverySummary: DeliverySummary{
		Listed: 9, Newest: &HookAttempt{ID: 20, StatusCode: 202, At: now},
		Failed: []FailedEvent{ev("a", 1, true), ev("b", 2, false), ev("c", 3, false)},
	}}
}

// The previous scheduled run's result remembers "b": only "c" is redelivered, once, and the
// next run's memory holds both, while a guid remembered beyond the window is forgotten.
func TestReconcileRedeliversEachFailedEventOnce(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	env := redeliverEnv(t, failedListing(now))
	env.SetStartTime(now)
	env.SetLastCompletionResult(ReconcileReport{Deliveries: &DeliveryReport{Remembered: []RememberedDelivery{
		{GUID: "b", At: now.Add(-time.Minute)}, {GUID: "gone", At: now.Add(-ReconcileRedeliverWindow - time.Minute)},
	}}})
	env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, RedeliverHookDeliveryInput{Hook: testHook, DeliveryID: 3, GUID: "c"}).
		Return(RedeliverHookDeliveryResult{}, nil).Once()
	d := runReconcile(t, env, ReconcileInput{Hook: testHook}).Deliveries
	if d.Failed != 3 || d.AlreadyRedelivered != 2 || d.Redelivered != 1 || len(d.Redeliveries) != 1 || d.Redeliveries[0].GUID != "c" || d.Hook != "org:acme/12" {
		t.Errorf("report %+v; want c redelivered, a and b already", d)
	}
	if len(d.Remembered) != 2 || d.Remembered[0].GUID != "b" || d.Remembered[1].GUID != "c" {
		t.Errorf("remembered %+v, want b and c", d.Remembered)
	}
}

// A dry run reports what it would redeliver and sends nothing; a refused redelivery is reported
// and not remembered (the next run looks at GitHub's listing again).
func TestReconcileRedeliveryDryRunAndRefusal(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	env := redeliverEnv(t, failedListing(now))
	env.SetStartTime(now)
	env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, mock.Anything).Return(RedeliverHookDeliveryResult{}, nil).Never()
	d := runReconcile(t, env, ReconcileInput{Hook: testHook, DryRun: true}).Deliveries
	if d.Redelivered != 0 || len(d.Redeliveries) != 2 || len(d.Remembered) != 0 {
		t.Errorf("dry run %+v; want b and c listed, nothing redelivered or remembered", d)
	}

	env = redeliverEnv(t, failedListing(now))
	env.SetStartTime(now)
	limited := temporal.NewApplicationError("redeliver webhook delivery: 403 secondary rate limit", ErrRateLimited)
	env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, RedeliverHookDeliveryInput{Hook: testHook, DeliveryID: 2, GUID: "b"}).
		Return(RedeliverHookDeliveryResult{}, limited).Once()
	env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, RedeliverHookDeliveryInput{Hook: testHook, DeliveryID: 3, GUID: "c"}).
		Return(RedeliverHookDeliveryResult{}, nil).Once()
	d = runReconcile(t, env, ReconcileInput{Hook: testHook}).Deliveries
	if d.Redelivered != 1 || d.Redeliveries[0].Error == "" || d.Redeliveries[1].Error != "" || len(d.Remembered) != 1 || d.Remembered[0].GUID != "c" {
		t.Errorf("report %+v; want b refused and not remembered, c redelivered and remembered", d)
	}
}

// A listing that fails is reported; the run goes on to its orphans and fails nothing.
func TestReconcileRedeliveryListingFails(t *testing.T) {
	env := redeliverEnv(t, ListHookDeliveriesResult{})
	env.OnActivity(ActivityListHookDeliveries, mock.Anything, mock.Anything).
		Return(ListHookDeliveriesResult{}, temporal.NewNonRetryableApplicationError("list webhook deliveries: 404 Not Found", ErrNotFound, errors.New("404"))).Once()
	r := runReconcile(t, env, ReconcileInput{Hook: testHook})
	if r.Deliveries.Error == "" || r.Phase != ReconcileDone {
		t.Errorf("report %+v; want the listing's error and the run done", r)
	}
}
