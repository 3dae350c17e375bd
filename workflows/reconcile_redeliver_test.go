package workflows

import (
	"context"
	"errors"
	"fmt"
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
	env.RegisterActivityWithOptions(func(context.Context, PingHookInput) (PingHookResult, error) {
		return PingHookResult{}, nil
	}, activity.RegisterOptions{Name: ActivityPingHook})
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

// downListing: the intake is down. Its newest attempt (a job's queued event, or the last
// run's probe) failed, and the queued events of the jobs so far failed with it.
func downListing(now time.Time, jobs int) ListHookDeliveriesResult {
	var failed []FailedEvent
	for i := range jobs {
		failed = append(failed, FailedEvent{GUID: fmt.Sprint("job-", i), Event: EventWorkflowJob, Action: JobQueued,
			DeliveryID: int64(i + 1), FailedAt: now.Add(time.Duration(i-jobs) * time.Minute)})
	}
	return ListHookDeliveriesResult{Pages: 1, DeliverySummary: DeliverySummary{
		Listed: 2 * jobs, Newest: &HookAttempt{ID: 100, Event: "ping", At: now.Add(-time.Minute)}, Failed: failed}}
}

// The intake is down for 30 minutes, one job queued every 5 (the reconcile interval): each run
// meets a hook whose newest delivery failed and pings it; none redelivers a failed event, so
// none is spent while the intake cannot take it. Then the hook answers (the ping succeeded):
// the next run redelivers every one of them, once.
func TestReconcileIntakeOutageSpendsNoEvent(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var prev ReconcileReport
	for run := 1; run <= 6; run++ {
		now := start.Add(time.Duration(run) * DefaultReconcileInterval)
		env := redeliverEnv(t, downListing(now, run))
		env.SetStartTime(now)
		env.SetLastCompletionResult(prev)
		env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, mock.Anything).Return(RedeliverHookDeliveryResult{}, nil).Never()
		env.OnActivity(ActivityPingHook, mock.Anything, PingHookInput{Hook: testHook}).Return(PingHookResult{}, nil).Once()
		prev = runReconcile(t, env, ReconcileInput{Hook: testHook})
		if d := prev.Deliveries; !d.Probe || d.ProbeBy != ProbePing || d.Redelivered != 0 || d.Deferred != run || len(d.Remembered) != 0 {
			t.Fatalf("run %d while the intake is down: %+v; want a ping, %d events deferred, none spent", run, d, run)
		}
	}
	now := start.Add(7 * DefaultReconcileInterval)
	back := downListing(now, 6)
	back.Newest = &HookAttempt{ID: 101, Event: "ping", StatusCode: 200, At: now.Add(-time.Minute)}
	env := redeliverEnv(t, back)
	env.SetStartTime(now)
	env.SetLastCompletionResult(prev)
	for i := range 6 {
		env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, RedeliverHookDeliveryInput{Hook: testHook, DeliveryID: int64(i + 1), GUID: fmt.Sprint("job-", i)}).
			Return(RedeliverHookDeliveryResult{}, nil).Once()
	}
	env.OnActivity(ActivityPingHook, mock.Anything, mock.Anything).Return(PingHookResult{}, nil).Never()
	if d := runReconcile(t, env, ReconcileInput{Hook: testHook}).Deliveries; d.Probe || d.Redelivered != 6 || len(d.Remembered) != 6 {
		t.Errorf("the run after the intake answered again: %+v; want all 6 events redelivered", d)
	}
}

// The App's webhook has no ping: a run probes it with the redelivery of a delivery that
// succeeded (whose repeat reserves nothing), and with nothing such in the window it waits.
func TestReconcileProbesAnAppHookWithASucceededDelivery(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	app := HookRef{App: true}
	listed := downListing(now, 2)
	listed.ProbeCandidate = &HookAttempt{ID: 40, GUID: "served", Event: EventWorkflowJob, Action: JobQueued, StatusCode: 202, At: now.Add(-30 * time.Minute)}
	env := redeliverEnv(t, listed)
	env.SetStartTime(now)
	env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, RedeliverHookDeliveryInput{Hook: app, DeliveryID: 40, GUID: "served"}).
		Return(RedeliverHookDeliveryResult{}, nil).Once()
	d := runReconcile(t, env, ReconcileInput{Hook: app}).Deliveries
	if !d.Probe || d.ProbeBy != ProbeSucceededDelivery || d.ProbeGUID != "served" || d.Redelivered != 0 || d.Deferred != 2 || len(d.Remembered) != 0 {
		t.Errorf("report %+v; want the succeeded delivery redelivered as the probe, both failed events deferred", d)
	}

	env = redeliverEnv(t, downListing(now, 2))
	env.SetStartTime(now)
	env.OnActivity(ActivityRedeliverHookDelivery, mock.Anything, mock.Anything).Return(RedeliverHookDeliveryResult{}, nil).Never()
	if d := runReconcile(t, env, ReconcileInput{Hook: app}).Deliveries; d.ProbeBy != ProbeNone || d.Deferred != 2 {
		t.Errorf("report %+v; want no probe and both events waiting", d)
	}
}
