package main

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The trace splits a signal's wait into the task's queue wait and run, carries a signal over a
// task that timed out to the task that saw it, times a continue-as-new from its suggestion, and
// leaves out what happened before the burst.
func TestDeciderTraceSplitsASignalsWait(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var history []*historypb.HistoryEvent
	add := func(at time.Time, typ enumspb.EventType, set func(*historypb.HistoryEvent)) {
		ev := &historypb.HistoryEvent{EventId: int64(len(history) + 1), EventTime: timestamppb.New(at), EventType: typ}
		if set != nil {
			set(ev)
		}
		history = append(history, ev)
	}
	scheduled := func(at time.Time) { add(at, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil) }
	started := func(at time.Time, scheduledID int64, suggest bool) {
		add(at, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{
				ScheduledEventId: scheduledID, SuggestContinueAsNew: suggest}}
		})
	}
	completed := func(at time.Time, startedID int64) {
		add(at, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
				StartedEventId: startedID}}
		})
	}
	signaled := func(at time.Time) { add(at, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil) }

	add(ms(-5000), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)                           // 1
	scheduled(ms(-5000))                                                                         // 2
	started(ms(-4000), 2, false)                                                                 // 3: before the span
	completed(ms(-3900), 3)                                                                      // 4
	signaled(ms(0))                                                                              // 5
	scheduled(ms(0))                                                                             // 6
	started(ms(100), 6, false)                                                                   // 7
	signaled(ms(150))                                                                            // 8: arrives while task 7 runs
	completed(ms(200), 7)                                                                        // 9: sees signal 5
	scheduled(ms(200))                                                                           // 10
	add(ms(5200), enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, func(ev *historypb.HistoryEvent) { // 11
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes{WorkflowTaskTimedOutEventAttributes: &historypb.WorkflowTaskTimedOutEventAttributes{
			ScheduledEventId: 10, TimeoutType: enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START}}
	})
	scheduled(ms(5200))         // 12
	started(ms(5300), 12, true) // 13: sees signal 8, and is asked to continue as new
	completed(ms(5400), 13)     // 14
	add(ms(9300), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, nil)

	tr := newDeciderTracer(t0, t0.Add(time.Minute))
	for _, ev := range history {
		tr.visit(ev)
	}
	got := tr.result()

	if got.Heard.N != 2 || got.Heard.P50ms != 200 || got.Heard.MaxMs != 5250 {
		t.Errorf("heard = %+v, want signal 5 seen after 200 ms and signal 8 after 5 250 ms (the timed-out task saw nothing)", got.Heard)
	}
	if got.QueueWait.N != 3 || got.QueueWait.P50ms != 100 || got.QueueWait.MaxMs != 5000 {
		t.Errorf("queue wait = %+v, want the two tasks started in the span (100 ms each) and the 5 000 ms of the one no worker took", got.QueueWait)
	}
	if got.Run.N != 2 || got.Run.MaxMs != 100 {
		t.Errorf("run = %+v, want two tasks of 100 ms", got.Run)
	}
	if got.TimedOut["schedule-to-start"] != 1 || got.Failed != 0 {
		t.Errorf("timed out %v, failed %d; want one schedule-to-start timeout", got.TimedOut, got.Failed)
	}
	if got.ContinuesAsNew != 1 || got.ContinueAsNewWait.MaxMs != 4000 {
		t.Errorf("continue-as-new: %d after %+v; want one, 4 000 ms after its suggestion", got.ContinuesAsNew, got.ContinueAsNewWait)
	}

	// A second history starts afresh: its first task's wait is its own.
	tr.visit(&historypb.HistoryEvent{EventId: 1, EventTime: timestamppb.New(ms(10000)), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED})
	tr.visit(&historypb.HistoryEvent{EventId: 2, EventTime: timestamppb.New(ms(10000)), EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED})
	tr.visit(&historypb.HistoryEvent{EventId: 3, EventTime: timestamppb.New(ms(10030)), EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: 2}}})
	if got := tr.result().QueueWait; got.N != 4 || got.P50ms != 100 || got.MaxMs != 5000 {
		t.Errorf("after a second history, queue wait = %+v, want a fourth sample of 30 ms", got)
	}
}
