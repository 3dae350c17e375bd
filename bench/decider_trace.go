package main

import (
	"fmt"
	"io"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// DeciderTrace is where a decider's time went during a burst (issue 37: trace the tail before
// tuning it), read from its histories between the first webhook and the last job started.
// A signal's wait until the decider has seen it splits into the workflow task's wait for a
// worker (queue wait: scheduled → started; a sticky task that no worker took in time is timed
// out and scheduled again on the normal queue) and the worker's work on it (run: started →
// completed). A pool that Temporal asked to continue as new decides nothing more until its work
// in flight has ended and it has continued (continue-as-new wait).
type DeciderTrace struct {
	// Heard runs from a signal's arrival to the completion of the workflow task that saw it.
	Heard     Percentiles `json:"heard"`
	QueueWait Percentiles `json:"queueWait"`
	Run       Percentiles `json:"run"`
	// TimedOut counts workflow tasks timed out by kind (schedule-to-start: a sticky task no
	// worker took; start-to-close: a worker that did not answer); Failed those a worker failed.
	TimedOut map[string]int `json:"timedOut,omitempty"`
	Failed   int            `json:"failed,omitempty"`
	// ContinuesAsNew counts the runs that continued as new in the span, and ContinueAsNewWait
	// how long each took from Temporal's first suggestion to its continue-as-new.
	ContinuesAsNew    int         `json:"continuesAsNew"`
	ContinueAsNewWait Percentiles `json:"continueAsNewWait"`
}

// deciderTracer builds a DeciderTrace from histories shown to it one after another, each from
// its first event (historyCost's visit).
type deciderTracer struct {
	from, to time.Time

	// Per history: workflow tasks by event id, signals not yet seen by a task, signals seen by
	// the task in flight, the first task started with a continue-as-new suggestion.
	scheduled, started map[int64]time.Time
	unseen, inTask     []time.Time
	suggested          time.Time

	heard, queueWait, run, canWait []time.Duration
	timedOut                       map[string]int
	failed, continues              int

	// timeline, if set, gets every event of the span, one line each (the trace's raw material).
	timeline io.Writer
	history  int
}

func newDeciderTracer(from, to time.Time) *deciderTracer {
	return &deciderTracer{from: from, to: to, timedOut: map[string]int{}}
}

func (t *deciderTracer) inSpan(at time.Time) bool { return !at.Before(t.from) && !at.After(t.to) }

// visit takes the next event of the history being shown; an event id of 1 starts a new one.
func (t *deciderTracer) visit(ev *historypb.HistoryEvent) {
	if ev.GetEventId() == 1 {
		t.scheduled, t.started = map[int64]time.Time{}, map[int64]time.Time{}
		t.unseen, t.inTask, t.suggested = nil, nil, time.Time{}
		t.history++
	}
	at := ev.GetEventTime().AsTime()
	if t.timeline != nil && !at.Before(t.from) {
		fmt.Fprintf(t.timeline, "%d\t%d\t%.3f\t%s\t%s\n", t.history, ev.GetEventId(), at.Sub(t.from).Seconds(), ev.GetEventType(), eventDetail(ev))
	}
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		if t.inSpan(at) {
			t.unseen = append(t.unseen, at)
		}
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
		t.scheduled[ev.GetEventId()] = at
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
		a := ev.GetWorkflowTaskStartedEventAttributes()
		t.started[ev.GetEventId()] = at
		if s, ok := t.scheduled[a.GetScheduledEventId()]; ok && t.inSpan(s) {
			t.queueWait = append(t.queueWait, at.Sub(s))
		}
		if a.GetSuggestContinueAsNew() && t.suggested.IsZero() {
			t.suggested = at
		}
		t.inTask = append(t.inTask, t.unseen...)
		t.unseen = nil
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		if s, ok := t.started[ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()]; ok && t.inSpan(at) {
			t.run = append(t.run, at.Sub(s))
		}
		for _, sig := range t.inTask {
			t.heard = append(t.heard, at.Sub(sig))
		}
		t.inTask = nil
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		a := ev.GetWorkflowTaskTimedOutEventAttributes()
		if s, ok := t.scheduled[a.GetScheduledEventId()]; ok && t.inSpan(s) {
			t.timedOut[timeoutKind(a.GetTimeoutType())]++
			if a.GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				t.queueWait = append(t.queueWait, at.Sub(s)) // a wait no worker ended
			}
		}
		t.unseen, t.inTask = append(t.inTask, t.unseen...), nil // the next task sees them
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		if t.inSpan(at) {
			t.failed++
		}
		t.unseen, t.inTask = append(t.inTask, t.unseen...), nil
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		if t.inSpan(at) {
			t.continues++
			if !t.suggested.IsZero() {
				t.canWait = append(t.canWait, at.Sub(t.suggested))
			}
		}
	}
}

func timeoutKind(tt enumspb.TimeoutType) string {
	switch tt {
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return "schedule-to-start"
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return "start-to-close"
	}
	return tt.String()
}

func (t *deciderTracer) result() DeciderTrace {
	tr := DeciderTrace{
		Heard: summarize(t.heard), QueueWait: summarize(t.queueWait), Run: summarize(t.run),
		Failed: t.failed, ContinuesAsNew: t.continues, ContinueAsNewWait: summarize(t.canWait),
	}
	if len(t.timedOut) > 0 {
		tr.TimedOut = t.timedOut
	}
	return tr
}

// eventDetail is what the timeline says of an event besides its type.
func eventDetail(ev *historypb.HistoryEvent) string {
	switch {
	case ev.GetWorkflowExecutionSignaledEventAttributes() != nil:
		return ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
	case ev.GetWorkflowTaskStartedEventAttributes() != nil:
		a := ev.GetWorkflowTaskStartedEventAttributes()
		return fmt.Sprintf("scheduled=%d suggestCAN=%v", a.GetScheduledEventId(), a.GetSuggestContinueAsNew())
	case ev.GetWorkflowTaskScheduledEventAttributes() != nil:
		return ev.GetWorkflowTaskScheduledEventAttributes().GetTaskQueue().GetName()
	case ev.GetWorkflowTaskTimedOutEventAttributes() != nil:
		a := ev.GetWorkflowTaskTimedOutEventAttributes()
		return fmt.Sprintf("%s scheduled=%d", timeoutKind(a.GetTimeoutType()), a.GetScheduledEventId())
	case ev.GetActivityTaskScheduledEventAttributes() != nil:
		return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
	case ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes() != nil:
		a := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes()
		return a.GetSignalName() + " → " + a.GetWorkflowExecution().GetWorkflowId()
	}
	return ""
}
