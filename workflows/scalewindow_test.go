package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// windowTest is a scale window under the test environment with a recording pool update.
type windowTest struct {
	env     *testsuite.TestWorkflowEnvironment
	batches []UpdatePoolReservationsInput
}

func newWindowTest(t *testing.T) *windowTest {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	wt := &windowTest{env: s.NewTestWorkflowEnvironment()}
	wt.env.RegisterWorkflowWithOptions(ScaleWindowWorkflow, workflow.RegisterOptions{Name: ScaleWindowWorkflowType})
	wt.env.RegisterActivityWithOptions(func(context.Context, UpdatePoolReservationsInput) (ReservationBatchResult, error) {
		return ReservationBatchResult{}, errors.New("not mocked")
	}, activity.RegisterOptions{Name: ActivityUpdatePoolReservations})
	return wt
}

// expectUpdate expects exactly one pool update and answers it as the pool would, counting
// queued events as added.
func (wt *windowTest) expectUpdate() {
	wt.env.OnActivity(ActivityUpdatePoolReservations, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in UpdatePoolReservationsInput) (ReservationBatchResult, error) {
			wt.batches = append(wt.batches, in)
			n := 0
			for _, ev := range in.Batch.Events {
				if ev.Action == JobQueued {
					n++
				}
			}
			return ReservationBatchResult{Added: n, Active: n}, nil
		}).Once()
}

func (wt *windowTest) signalAt(d time.Duration, ev WorkflowJobEvent) {
	wt.env.RegisterDelayedCallback(func() { wt.env.SignalWorkflow(SignalWorkflowJob, ev) }, d)
}

func ev(delivery string, job int64, action string) WorkflowJobEvent {
	return WorkflowJobEvent{DeliveryID: delivery, JobID: job, Action: action}
}

func jobIDs(events []WorkflowJobEvent) []int64 {
	var ids []int64
	for _, e := range events {
		ids = append(ids, e.JobID)
	}
	return ids
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestScaleWindowBatchesAndDedupes(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdate()
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.signalAt(time.Second, ev("d2", 2, JobQueued))
	wt.signalAt(time.Second, ev("d1", 1, JobQueued))      // same delivery redelivered
	wt.signalAt(2*time.Second, ev("d3", 2, JobQueued))    // same job and action, new delivery
	wt.signalAt(2*time.Second, ev("d4", 1, JobCompleted)) // same job, other action: kept
	wt.signalAt(2900*time.Millisecond, ev("d5", 3, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	wt.env.AssertExpectations(t)
	if len(wt.batches) != 1 {
		t.Fatalf("got %d pool updates, want exactly one per window", len(wt.batches))
	}
	b := wt.batches[0]
	if got, want := jobIDs(b.Batch.Events), []int64{1, 2, 1, 3}; !equalIDs(got, want) {
		t.Errorf("batch jobs %v, want %v", got, want)
	}
	if b.Pool != "linux" || b.UpdateID == "" || b.UpdateID != b.Batch.WindowID {
		t.Errorf("batch addressed wrongly: pool %q update id %q window id %q", b.Pool, b.UpdateID, b.Batch.WindowID)
	}
	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	want := ScaleWindowResult{Events: 4, Duplicates: 2, Applied: ReservationBatchResult{Added: 3, Active: 3}}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
}

// TestScaleWindowLateSignalDuringUpdate delivers an event while the window's update is in
// flight: the window must hand it to the next window by continue-as-new, not drop it.
func TestScaleWindowLateSignalDuringUpdate(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdate()
	wt.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		wt.env.SignalWorkflow(SignalWorkflowJob, ev("late", 7, JobQueued))
		wt.env.SignalWorkflow(SignalWorkflowJob, ev("d1", 1, JobQueued)) // a redelivery of the batch's event
	})
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Window: 5 * time.Second})

	wt.env.AssertExpectations(t)
	var can *workflow.ContinueAsNewError
	if err := wt.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("window ended with %v, want continue-as-new carrying the late event", err)
	}
	var next ScaleWindowInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Pool != "linux" || next.Window != 5*time.Second {
		t.Errorf("next window %+v lost its pool or window length", next)
	}
	if got := jobIDs(next.Carried); !equalIDs(got, []int64{7}) {
		t.Errorf("carried jobs %v, want [7] (the redelivery of job 1 dropped)", got)
	}
	if got := jobIDs(wt.batches[0].Batch.Events); !equalIDs(got, []int64{1}) {
		t.Errorf("first batch %v, want [1]", got)
	}
}

// TestScaleWindowCarriedEventsOpenTheWindow runs the window that continue-as-new starts.
func TestScaleWindowCarriedEventsOpenTheWindow(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdate()
	wt.signalAt(time.Second, ev("d8", 8, JobQueued))
	wt.signalAt(time.Second, ev("late", 7, JobQueued)) // already carried
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Carried: []WorkflowJobEvent{ev("late", 7, JobQueued)}})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	wt.env.AssertExpectations(t)
	if got := jobIDs(wt.batches[0].Batch.Events); !equalIDs(got, []int64{7, 8}) {
		t.Errorf("batch %v, want [7 8]", got)
	}
}

// TestScaleWindowEventAtTheClosingInstant sends an event exactly when the window's timer
// fires. Whether it lands in this batch or the next window, it must not be lost.
func TestScaleWindowEventAtTheClosingInstant(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdate()
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.signalAt(DefaultScaleWindow, ev("d2", 2, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	got := jobIDs(wt.batches[0].Batch.Events)
	var can *workflow.ContinueAsNewError
	if err := wt.env.GetWorkflowError(); errors.As(err, &can) {
		var next ScaleWindowInput
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			t.Fatal(err)
		}
		got = append(got, jobIDs(next.Carried)...)
	} else if err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if !equalIDs(got, []int64{1, 2}) {
		t.Errorf("events seen %v, want [1 2] across this window and the next", got)
	}
}

func TestScaleWindowClosesEarlyWhenFull(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdate()
	// The test environment queues at most 1000 callbacks: send the events in chunks.
	const chunk = 250
	for first := 1; first <= ScaleWindowMaxEvents; first += chunk {
		wt.env.RegisterDelayedCallback(func() {
			for i := first; i < first+chunk && i <= ScaleWindowMaxEvents; i++ {
				wt.env.SignalWorkflow(SignalWorkflowJob, ev("", int64(i), JobQueued))
			}
		}, time.Duration(first)*time.Microsecond)
	}
	wt.signalAt(time.Second, ev("", ScaleWindowMaxEvents+1, JobQueued))
	start := wt.env.Now()
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if n := len(wt.batches[0].Batch.Events); n != ScaleWindowMaxEvents {
		t.Errorf("batch of %d events, want %d", n, ScaleWindowMaxEvents)
	}
	if el := wt.env.Now().Sub(start); el >= time.Second {
		t.Errorf("a full window waited %v; it should close at once", el)
	}
}

func TestScaleWindowWithoutEventsSendsNothing(t *testing.T) {
	wt := newWindowTest(t)
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})
	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if len(wt.batches) != 0 {
		t.Errorf("an empty window sent %d updates", len(wt.batches))
	}
}

func TestScaleWindowRecordsARefusedBatch(t *testing.T) {
	wt := newWindowTest(t)
	wt.env.OnActivity(ActivityUpdatePoolReservations, mock.Anything, mock.Anything).
		Return(ReservationBatchResult{}, temporal.NewNonRetryableApplicationError("pool gone", ErrNotFound, nil)).Once()
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "gone"})

	wt.env.AssertExpectations(t)
	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if res.UpdateError == "" || res.Events != 1 {
		t.Errorf("result %+v, want the refusal recorded for 1 event", res)
	}
}

func TestScaleWindowRejectsEmptyPool(t *testing.T) {
	wt := newWindowTest(t)
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{})
	var appErr *temporal.ApplicationError
	if err := wt.env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != ErrInvalidSpec {
		t.Errorf("got %v, want an %s application error", err, ErrInvalidSpec)
	}
}
