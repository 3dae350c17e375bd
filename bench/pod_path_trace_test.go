package main

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runnerflow/runnerflow/workflows"
)

// The pod path splits a pod-first runner's start into its hand-overs, and leaves out a runner
// whose Secret came with its pod (no "pod-start" signal) and every attempt after a history's
// first.
func TestPodPathTraceSplitsAPodFirstStart(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var events []*historypb.HistoryEvent
	add := func(at time.Time, typ enumspb.EventType, set func(*historypb.HistoryEvent)) int64 {
		id := events[len(events)-1].GetEventId() + 1 // every history begins with begin()
		ev := &historypb.HistoryEvent{EventId: id, EventTime: timestamppb.New(at), EventType: typ}
		if set != nil {
			set(ev)
		}
		events = append(events, ev)
		return id
	}
	begin := func() {
		events = append(events, &historypb.HistoryEvent{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, EventTime: timestamppb.New(t0)})
	}
	scheduleActivity := func(at time.Time, name string) int64 {
		return add(at, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: name}}}
		})
	}
	startActivity := func(at time.Time, scheduled int64) {
		add(at, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: scheduled}}
		})
	}
	completeActivity := func(at time.Time, scheduled int64) {
		add(at, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
				ScheduledEventId: scheduled}}
		})
	}
	activity := func(name string, scheduled, started, completed int) {
		id := scheduleActivity(ms(scheduled), name)
		startActivity(ms(started), id)
		completeActivity(ms(completed), id)
	}
	signal := func(at time.Time, name string, sig workflows.PodStatusSignal) {
		payloads, err := converter.GetDefaultDataConverter().ToPayloads(sig)
		if err != nil {
			t.Fatal(err)
		}
		add(at, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
				SignalName: name, Input: payloads}}
		})
	}
	taskStarted := func(at time.Time) { add(at, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil) }

	// A cold pod-first runner: pod at 100 ms, scheduled heard at 600, its task at 2 600, the
	// registration queued 400 ms and run 1 000, running heard 1 500 ms later.
	begin()
	activity(workflows.ActivityCreateRunnerPod, 0, 10, 100)
	signal(ms(600), workflows.SignalPodStart, workflows.PodStatusSignal{Phase: workflows.PodPending, Scheduled: true})
	taskStarted(ms(2600))
	activity(workflows.ActivityRegisterRunner, 2700, 3100, 4100)
	signal(ms(5600), workflows.SignalPodStart, workflows.PodStatusSignal{Phase: workflows.PodRunning, Scheduled: true})
	// Its second attempt does not count.
	activity(workflows.ActivityCreateRunnerPod, 9000, 9000, 9100)
	signal(ms(60000), workflows.SignalPodStart, workflows.PodStatusSignal{Phase: workflows.PodRunning, Scheduled: true})

	// A runner whose Secret came before its pod: no pod-start signal, not traced.
	begin()
	activity(workflows.ActivityRegisterRunner, 0, 10, 50)
	activity(workflows.ActivityCreateRunnerPod, 60, 70, 100)
	signal(ms(900), workflows.SignalPodStatus, workflows.PodStatusSignal{Phase: workflows.PodSucceeded})

	// A warm runner heard running without a "scheduled" signal of its own (the watcher saw
	// both steps at once): scheduled counts from that one signal, and the copy follows it.
	begin()
	activity(workflows.ActivityCreateRunnerPod, 0, 0, 200)
	signal(ms(1200), workflows.SignalPodStart, workflows.PodStatusSignal{Phase: workflows.PodPending, Scheduled: true})
	taskStarted(ms(1300))
	activity(workflows.ActivityCopyWarmSecret, 1300, 1400, 1500)
	signal(ms(2000), workflows.SignalPodStart, workflows.PodStatusSignal{Phase: workflows.PodRunning, Scheduled: true})

	tr := newPodPathTracer()
	for _, ev := range events {
		tr.visit(ev)
	}
	got := tr.result()

	for name, c := range map[string]struct {
		got      Percentiles
		max, min float64
	}{
		"total":             {got.Total, 5500, 1800},
		"scheduled":         {got.Scheduled, 1000, 500},
		"woken":             {got.Woken, 2000, 100},
		"credential queued": {got.CredentialQueued, 400, 100},
		"credential run":    {got.CredentialRun, 1000, 100},
		"running":           {got.Running, 1500, 500},
	} {
		if c.got.N != 2 || c.got.MaxMs != c.max || c.got.P50ms != c.min {
			t.Errorf("%s = %+v, want 2 runners, the cold one's %.0f ms and the warm one's %.0f ms", name, c.got, c.max, c.min)
		}
	}
}
