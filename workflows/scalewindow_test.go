package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// windowTest is a scale window under the test environment with a recording pool update. It
// runs the window as released before changeSignalPool (the update path, which windows started
// by that release still take); signalWindowTest runs the signal path.
type windowTest struct {
	env     *testsuite.TestWorkflowEnvironment
	batches []UpdatePoolReservationsInput
	// sentAt is the (test environment's) time of each pool update.
	sentAt []time.Time
}

func newWindowTest(t *testing.T) *windowTest {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	wt := &windowTest{env: s.NewTestWorkflowEnvironment()}
	wt.env.RegisterWorkflowWithOptions(ScaleWindowWorkflow, workflow.RegisterOptions{Name: ScaleWindowWorkflowType})
	wt.env.RegisterActivityWithOptions(func(context.Context, UpdatePoolReservationsInput) (ReservationBatchResult, error) {
		return ReservationBatchResult{}, errors.New("not mocked")
	}, activity.RegisterOptions{Name: ActivityUpdatePoolReservations})
	wt.env.OnGetVersion(changeSignalPool, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	return wt
}

// expectUpdates expects exactly n pool updates and answers each as the pool would, counting
// queued events as added.
func (wt *windowTest) expectUpdates(n int) {
	wt.env.OnActivity(ActivityUpdatePoolReservations, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in UpdatePoolReservationsInput) (ReservationBatchResult, error) {
			wt.batches = append(wt.batches, in)
			wt.sentAt = append(wt.sentAt, wt.env.Now())
			n := 0
			for _, ev := range in.Batch.Events {
				if ev.Action == JobQueued {
					n++
				}
			}
			return ReservationBatchResult{Added: n, Active: n}, nil
		}).Times(n)
}

// allEvents is every batch's jobs in the order they were sent.
func (wt *windowTest) allEvents() []int64 {
	var ids []int64
	for _, b := range wt.batches {
		ids = append(ids, jobIDs(b.Batch.Events)...)
	}
	return ids
}

func (wt *windowTest) signalAt(d time.Duration, ev WorkflowJobEvent) {
	wt.env.RegisterDelayedCallback(func() { wt.env.SignalWorkflow(SignalWorkflowJob, ev) }, d)
}

// signalBatchAt sends events as one SignalWorkflowJobs batch, as the starter's group commit does.
func (wt *windowTest) signalBatchAt(d time.Duration, events ...WorkflowJobEvent) {
	wt.env.RegisterDelayedCallback(func() {
		wt.env.SignalWorkflow(SignalWorkflowJobs, WorkflowJobsSignal{Events: events})
	}, d)
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

// TestScaleWindowBatchesAndDedupes: the opening event of an idle pool goes to the pool at
// once; the events of the window after it go as one batch, duplicates dropped.
func TestScaleWindowBatchesAndDedupes(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(2)
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.signalAt(time.Second, ev("d2", 2, JobQueued))
	wt.signalAt(time.Second, ev("d1", 1, JobQueued))      // same delivery redelivered
	wt.signalAt(2*time.Second, ev("d3", 2, JobQueued))    // same job and action, new delivery
	wt.signalAt(2*time.Second, ev("d4", 1, JobCompleted)) // same job, other action: kept
	wt.signalAt(2900*time.Millisecond, ev("d5", 3, JobQueued))
	start := wt.env.Now()
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	wt.env.AssertExpectations(t)
	if len(wt.batches) != 2 {
		t.Fatalf("got %d pool updates, want the opening event at once and one batch for the rest", len(wt.batches))
	}
	if got := jobIDs(wt.batches[0].Batch.Events); !equalIDs(got, []int64{1}) {
		t.Errorf("opening batch %v, want [1]", got)
	}
	if d := wt.sentAt[0].Sub(start); d != 0 {
		t.Errorf("the opening event waited %v for the window; it should go at once", d)
	}
	if got := jobIDs(wt.batches[1].Batch.Events); !equalIDs(got, []int64{2, 1, 3}) {
		t.Errorf("window batch %v, want [2 1 3]", got)
	}
	for _, b := range wt.batches {
		if b.Pool != "linux" || b.UpdateID == "" || b.UpdateID != b.Batch.WindowID {
			t.Errorf("batch addressed wrongly: pool %q update id %q window id %q", b.Pool, b.UpdateID, b.Batch.WindowID)
		}
	}
	if wt.batches[0].UpdateID == wt.batches[1].UpdateID {
		t.Errorf("both updates have id %q: the server would drop the second as a retry of the first", wt.batches[0].UpdateID)
	}
	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	want := ScaleWindowResult{Events: 4, Duplicates: 2, Applied: ReservationBatchResult{Added: 3, Active: 2}}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
}

// signalDuringUpdates sends events while the window's updates are in flight: one during the
// opening update, and during the window's own update a new event and a redelivery of the first.
func (wt *windowTest) signalDuringUpdates() {
	updates := 0
	wt.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		updates++
		switch updates {
		case 1:
			wt.env.SignalWorkflow(SignalWorkflowJob, ev("during-opening", 5, JobQueued))
		case 2:
			wt.env.SignalWorkflow(SignalWorkflowJob, ev("late", 7, JobQueued))
			wt.env.SignalWorkflow(SignalWorkflowJob, ev("d1", 1, JobQueued)) // a redelivery of the batch's event
		}
	})
}

// TestScaleWindowLateSignalDuringUpdate delivers events while the window's updates are in
// flight: during the opening update they join the window's batch; during the window's own
// update they open the next window in the same run, never dropped, and reach the pool in that
// window's own update.
func TestScaleWindowLateSignalDuringUpdate(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(3)
	wt.signalDuringUpdates()
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Window: 5 * time.Second})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	wt.env.AssertExpectations(t)
	if got := wt.allEvents(); !equalIDs(got, []int64{1, 5, 7}) {
		t.Errorf("batches %v, want [1], [5], then [7] (the redelivery of job 1 dropped)", got)
	}
	if got := jobIDs(wt.batches[2].Batch.Events); !equalIDs(got, []int64{7}) {
		t.Errorf("the next window's batch is %v, want [7]", got)
	}
	if d := wt.sentAt[2].Sub(wt.sentAt[1]); d < 5*time.Second {
		t.Errorf("the next window's update came %v after the previous one; it should collect for its window (5 s)", d)
	}
	ids := map[string]bool{}
	for _, b := range wt.batches {
		ids[b.UpdateID] = true
	}
	if len(ids) != 3 {
		t.Errorf("update ids %v: each update of a run needs its own, or the server drops it as a retry", ids)
	}
}

// TestScaleWindowContinuesAsNewWhenSuggested: once Temporal suggests a new run (the history has
// grown), the events that arrived during the update open the next window in a new run.
func TestScaleWindowContinuesAsNewWhenSuggested(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(2)
	wt.env.SetContinueAsNewSuggested(true)
	wt.signalDuringUpdates()
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Window: 5 * time.Second})
	wt.checkCarriedToNextRun(t, []int64{7})
	if got := wt.allEvents(); !equalIDs(got, []int64{1, 5}) {
		t.Errorf("batches %v, want [1] then [5]", got)
	}
}

// TestScaleWindowOfThePreviousReleaseContinuesAsNew: a run begun by the previous release (no
// changeRunSpansWindows marker) keeps continuing as new after every window, as its history did.
func TestScaleWindowOfThePreviousReleaseContinuesAsNew(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(2)
	wt.env.OnGetVersion(changeRunSpansWindows, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	wt.signalDuringUpdates()
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Window: 5 * time.Second})
	wt.checkCarriedToNextRun(t, []int64{7})
}

// checkCarriedToNextRun: the window continued as new with its pool, window length and the jobs.
func (wt *windowTest) checkCarriedToNextRun(t *testing.T, jobs []int64) {
	t.Helper()
	wt.env.AssertExpectations(t)
	var can *workflow.ContinueAsNewError
	if err := wt.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("window ended with %v, want continue-as-new carrying jobs %v", err, jobs)
	}
	var next ScaleWindowInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Pool != "linux" || next.Window != 5*time.Second {
		t.Errorf("next window %+v lost its pool or window length", next)
	}
	if got := jobIDs(next.Carried); !equalIDs(got, jobs) {
		t.Errorf("carried jobs %v, want %v", got, jobs)
	}
}

// TestScaleWindowBoundsEachWindowOfARun: the bound on a window's events counts that window's
// events only, so the second window of a busy run collects for its whole length even when the
// run has held more than ScaleWindowMaxEvents.
func TestScaleWindowBoundsEachWindowOfARun(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(3)
	first := ScaleWindowMaxEvents - 100
	updates := 0
	wt.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		if updates++; updates == 2 { // during the first window's update: open the second
			wt.env.SignalWorkflow(SignalWorkflowJobs, WorkflowJobsSignal{Events: queuedJobs(first+1, 200)})
		}
	})
	wt.signalBatchAt(0, ev("opening", 1, JobQueued))
	for from := 2; from <= first; from += WorkflowJobsSignalMaxEvents {
		wt.signalBatchAt(time.Second, queuedJobs(from, min(WorkflowJobsSignalMaxEvents, first-from+1))...)
	}
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	wt.env.AssertExpectations(t)
	if n := len(wt.allEvents()); n != first+200 {
		t.Errorf("the run sent %d events, want all %d", n, first+200)
	}
	if d := wt.sentAt[2].Sub(wt.sentAt[1]); d < DefaultScaleWindow {
		t.Errorf("the second window's update came %v after the first's: it closed early, counting the run's events", d)
	}
}

// queuedJobs is n queued events for jobs from, from+1, ...
func queuedJobs(from, n int) []WorkflowJobEvent {
	var events []WorkflowJobEvent
	for j := from; j < from+n; j++ {
		events = append(events, ev(fmt.Sprint("d", j), int64(j), JobQueued))
	}
	return events
}

// TestScaleWindowCarriedEventsOpenTheWindow runs the window that continue-as-new starts.
// The window is busy already, so nothing is applied before the window closes: one update.
func TestScaleWindowCarriedEventsOpenTheWindow(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(1)
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
//
// It runs a window opened by carried events (a busy pool's), which always ends with its update.
// A quiet pool's window that has nothing left to send completes in the task its timer fires
// in; a signal racing that completion is safe on the real server (it refuses to complete a run
// with unseen signals and runs another task), which the test environment does not model.
func TestScaleWindowEventAtTheClosingInstant(t *testing.T) {
	wt := newWindowTest(t)
	wt.env.OnActivity(ActivityUpdatePoolReservations, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in UpdatePoolReservationsInput) (ReservationBatchResult, error) {
			wt.batches = append(wt.batches, in)
			return ReservationBatchResult{}, nil
		})
	wt.signalAt(DefaultScaleWindow, ev("d2", 2, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Carried: []WorkflowJobEvent{ev("d1", 1, JobQueued)}})

	got := wt.allEvents()
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
	wt.expectUpdates(2)
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
	if n := len(wt.allEvents()); n != ScaleWindowMaxEvents {
		t.Errorf("the window sent %d events, want %d (the one after them opens the next window)", n, ScaleWindowMaxEvents)
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

// TestScaleWindowHoldsItsBatchWhileThePoolIsUnreachable: acknowledged events are never dropped;
// the window retries its update while the pool does not answer, and the pool gets the batch
// once it does. (The test environment caps retries at ten attempts, about 80 s under the
// policy; the policy itself sets no limit, which the second half checks.)
func TestScaleWindowHoldsItsBatchWhileThePoolIsUnreachable(t *testing.T) {
	p := ReservationUpdatePolicy
	if p.ScheduleToCloseTimeout != 0 || p.RetryPolicy.MaximumAttempts != 0 || p.RetryPolicy.MaximumInterval > time.Minute {
		t.Errorf("ReservationUpdatePolicy %+v / %+v gives up or waits long between tries; a window must hold its batch until the pool takes it",
			p, *p.RetryPolicy)
	}
	wt := newWindowTest(t)
	start := wt.env.Now()
	wt.env.OnActivity(ActivityUpdatePoolReservations, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in UpdatePoolReservationsInput) (ReservationBatchResult, error) {
			if wt.env.Now().Sub(start) < time.Minute {
				return ReservationBatchResult{}, errors.New("pool not answering")
			}
			wt.batches = append(wt.batches, in)
			return ReservationBatchResult{Added: len(in.Batch.Events), Active: len(in.Batch.Events)}, nil
		})
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if res.UpdateError != "" || res.Applied.Added != 1 || !equalIDs(wt.allEvents(), []int64{1}) {
		t.Errorf("result %+v, batches %v: want the one event applied once the pool answered", res, wt.allEvents())
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

// TestScaleWindowTakesBatchesAndSingleEventsOncePerJob: a window takes the starter's batch
// signals and the previous release's one-event signals alike, in the order each was sent, and
// every job reaches the pool once per action whichever signal carried it and however often.
func TestScaleWindowTakesBatchesAndSingleEventsOncePerJob(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(2)
	wt.signalBatchAt(0, ev("d1", 1, JobQueued), ev("d2", 2, JobQueued))
	wt.signalAt(time.Second, ev("d3", 3, JobQueued))
	wt.signalBatchAt(time.Second, ev("d4", 4, JobQueued), ev("d2-again", 2, JobQueued), ev("d5", 5, JobQueued))
	wt.signalAt(2*time.Second, ev("d1", 1, JobQueued))      // a redelivery, by the previous release's signal
	wt.signalBatchAt(2*time.Second, ev("d3", 3, JobQueued)) // a redelivery, by a batch
	wt.signalBatchAt(2*time.Second, ev("d6", 1, JobCompleted), ev("d7", 6, JobQueued))
	wt.signalBatchAt(2 * time.Second) // an empty batch changes nothing
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	wt.env.AssertExpectations(t)
	if got := jobIDs(wt.batches[0].Batch.Events); !equalIDs(got, []int64{1, 2}) {
		t.Errorf("opening batch %v, want the opening signal's jobs [1 2] at once", got)
	}
	if got := jobIDs(wt.batches[1].Batch.Events); !equalIDs(got, []int64{3, 4, 5, 1, 6}) {
		t.Errorf("window batch %v, want [3 4 5 1 6]: each signal's events in order, each job and action once", got)
	}
	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Events != 7 || res.Duplicates != 3 || res.Applied.Added != 6 {
		t.Errorf("result %+v, want 7 events, 3 duplicates dropped, 6 queued jobs added", res)
	}
}

// TestScaleWindowCarriesABatchThatArrivesDuringItsUpdate: a batch that arrives while the
// window's own update is in flight opens the next window (here in a new run, which Temporal
// suggested), its duplicates dropped, never lost.
func TestScaleWindowCarriesABatchThatArrivesDuringItsUpdate(t *testing.T) {
	wt := newWindowTest(t)
	wt.expectUpdates(1)
	wt.env.SetContinueAsNewSuggested(true)
	wt.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		wt.env.SignalWorkflow(SignalWorkflowJobs, WorkflowJobsSignal{Events: []WorkflowJobEvent{
			ev("late", 7, JobQueued), ev("d1", 1, JobQueued), ev("later", 8, JobQueued),
		}})
	})
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Carried: []WorkflowJobEvent{ev("d1", 1, JobQueued)}})

	wt.env.AssertExpectations(t)
	var can *workflow.ContinueAsNewError
	if err := wt.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("window ended with %v, want continue-as-new carrying the batch", err)
	}
	var next ScaleWindowInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if got := jobIDs(next.Carried); !equalIDs(got, []int64{7, 8}) {
		t.Errorf("carried jobs %v, want [7 8] (the redelivery of job 1 dropped)", got)
	}
}

// signalWindowTest is a scale window that hands its batches to the pool by signal
// (changeSignalPool), with the pool played by the external-signal mock.
type signalWindowTest struct {
	env     *testsuite.TestWorkflowEnvironment
	batches []ReservationBatch
	sentAt  []time.Time
	// poolGone makes every signal to the pool fail as it does for a pool with no workflow.
	poolGone bool
}

func newSignalWindowTest(t *testing.T) *signalWindowTest {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	wt := &signalWindowTest{env: s.NewTestWorkflowEnvironment()}
	wt.env.RegisterWorkflowWithOptions(ScaleWindowWorkflow, workflow.RegisterOptions{Name: ScaleWindowWorkflowType})
	wt.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID("linux"), "", SignalReservations, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			if wt.poolGone {
				return &temporal.UnknownExternalWorkflowExecutionError{}
			}
			wt.batches = append(wt.batches, arg.(ReservationBatch))
			wt.sentAt = append(wt.sentAt, wt.env.Now())
			return nil
		})
	return wt
}

// A window that signals its pool sends the opening event at once and the rest of its window in
// one more signal, each job and action once, with no activity and no update; its result counts
// what it handed over.
func TestScaleWindowSignalsItsBatchesToThePool(t *testing.T) {
	wt := newSignalWindowTest(t)
	send := func(d time.Duration, events ...WorkflowJobEvent) {
		wt.env.RegisterDelayedCallback(func() { wt.env.SignalWorkflow(SignalWorkflowJobs, WorkflowJobsSignal{Events: events}) }, d)
	}
	send(0, ev("d1", 1, JobQueued))
	send(time.Second, ev("d2", 2, JobQueued), ev("d1-again", 1, JobQueued))
	send(2*time.Second, ev("d3", 1, JobCompleted))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if len(wt.batches) != 2 || !equalIDs(jobIDs(wt.batches[0].Events), []int64{1}) || !equalIDs(jobIDs(wt.batches[1].Events), []int64{2, 1}) {
		t.Fatalf("signalled batches %+v, want [1] at once, then [2 1]", wt.batches)
	}
	if wt.sentAt[1].Sub(wt.sentAt[0]) < DefaultScaleWindow {
		t.Errorf("the window's batch left %v after the opening one, before its window closed", wt.sentAt[1].Sub(wt.sentAt[0]))
	}
	if wt.batches[0].WindowID == wt.batches[1].WindowID {
		t.Errorf("both batches carry window id %q: the pool tells a run's batches apart by it", wt.batches[0].WindowID)
	}
	if res.Signalled != 3 || res.Duplicates != 1 || res.UpdateError != "" {
		t.Errorf("result %+v, want 3 events signalled, 1 duplicate dropped", res)
	}
}

// A window whose pool has no workflow records the failure and ends; nothing waits for ever.
func TestScaleWindowRecordsAPoolThatIsGone(t *testing.T) {
	wt := newSignalWindowTest(t)
	wt.poolGone = true
	wt.signalAt(0, ev("d1", 1, JobQueued))
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	var res ScaleWindowResult
	if err := wt.env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if res.UpdateError == "" || res.Signalled != 0 || res.Events != 1 {
		t.Errorf("result %+v, want the failure recorded for 1 event", res)
	}
}

func (wt *signalWindowTest) signalAt(d time.Duration, ev WorkflowJobEvent) {
	wt.env.RegisterDelayedCallback(func() { wt.env.SignalWorkflow(SignalWorkflowJob, ev) }, d)
}

// A window opened by a job's end alone does not hand it over at once (nothing waits on it):
// the window's events go in one signal when it closes.
func TestScaleWindowOpenedByAnEndWaitsForItsWindow(t *testing.T) {
	wt := newSignalWindowTest(t)
	wt.signalAt(0, ev("d1", 1, JobCompleted))
	wt.signalAt(time.Second, ev("d2", 2, JobCompleted))
	start := wt.env.Now()
	wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux"})

	if err := wt.env.GetWorkflowError(); err != nil {
		t.Fatalf("window failed: %v", err)
	}
	if len(wt.batches) != 1 || !equalIDs(jobIDs(wt.batches[0].Events), []int64{1, 2}) {
		t.Fatalf("signalled batches %+v, want one with jobs [1 2] when the window closed", wt.batches)
	}
	if d := wt.sentAt[0].Sub(start); d < DefaultScaleWindow {
		t.Errorf("the batch left %v after the window opened, before the window closed", d)
	}
}
