package poolcli

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runnerflow/runnerflow/workflows"
)

// listenerRun builds a listener run's history, one event a step, a second apart.
type listenerRun struct {
	t      *testing.T
	t0     time.Time
	events []*historypb.HistoryEvent
}

func (r *listenerRun) payloads(v any) *commonpb.Payloads {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// add appends an event and returns its id.
func (r *listenerRun) add(typ enumspb.EventType, attrs func(*historypb.HistoryEvent)) int64 {
	id := int64(len(r.events) + 1)
	ev := &historypb.HistoryEvent{EventId: id, EventType: typ, EventTime: timestamppb.New(r.t0.Add(time.Duration(id) * time.Second))}
	attrs(ev)
	r.events = append(r.events, ev)
	return id
}

func (r *listenerRun) started(offered ...int64) {
	in := workflows.ScaleSetListenerInput{Pool: "linux", ScaleSetID: 3, State: &workflows.ScaleSetListenerState{Offered: offered}}
	r.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: r.payloads(in)}}
	})
}

func (r *listenerRun) scheduled(activity string, in any) int64 {
	return r.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: activity}, Input: r.payloads(in)}}
	})
}

func (r *listenerRun) completed(scheduled int64, out any) {
	r.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
			ScheduledEventId: scheduled, Result: r.payloads(out)}}
	})
}

func (r *listenerRun) failed(scheduled int64, msg string) {
	r.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{
			ScheduledEventId: scheduled, Failure: &failurepb.Failure{Message: msg}}}
	})
}

// poll is one poll answered with a message of the events given (event, request id pairs).
func (r *listenerRun) poll(events ...any) {
	id := r.scheduled(workflows.ActivityPollScaleSet, workflows.PollScaleSetInput{})
	msg := &workflows.ScaleSetMessage{ID: id}
	for i := 0; i < len(events); i += 2 {
		msg.Jobs = append(msg.Jobs, workflows.ScaleSetJobEvent{Event: events[i].(string), RunnerRequestID: events[i+1].(int64)})
	}
	r.completed(id, workflows.PollScaleSetOutput{Message: msg})
}

func (r *listenerRun) acquire(ids ...int64) int64 {
	return r.scheduled(workflows.ActivityAcquireScaleSetJobs, workflows.AcquireScaleSetJobsInput{RunnerRequestIDs: ids})
}

func (r *listenerRun) at(id int64) time.Time { return r.t0.Add(time.Duration(id) * time.Second) }

// The listener keeps its offers in its own state; `why` follows one job through the run's
// history instead: carried into the run, offered by a poll, acquired, not given, failing, or
// given to the set by an assignment.
func TestOfferScanFollowsOneJobThroughTheListenersRun(t *testing.T) {
	const job = int64(77)
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		steps func(r *listenerRun)
		want  func(r *listenerRun) SetJob
	}{
		{"never offered", func(r *listenerRun) {
			r.started(5)
			r.poll(workflows.ScaleSetJobAvailable, int64(6))
		}, func(*listenerRun) SetJob { return SetJob{} }},
		{"carried into the run", func(r *listenerRun) { r.started(5, job) },
			func(r *listenerRun) SetJob { return SetJob{Place: SetOffered, OfferedAt: r.at(1), OfferCarried: true} }},
		{"offered by a poll, a redelivery keeps its first time", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAvailable, job)
			r.poll(workflows.ScaleSetJobAvailable, job, workflows.ScaleSetJobAssigned, int64(5))
		}, func(r *listenerRun) SetJob { return SetJob{Place: SetOffered, OfferedAt: r.at(3)} }},
		{"acquired", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAvailable, job)
			r.completed(r.acquire(5, job), workflows.AcquireScaleSetJobsOutput{Acquired: []int64{5, job}})
		}, func(r *listenerRun) SetJob {
			return SetJob{Place: SetAcquired, OfferedAt: r.at(3), Acquire: &Acquisition{At: r.at(4), Outcome: AcquireDone}}
		}},
		{"not given", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAvailable, job)
			r.completed(r.acquire(job), workflows.AcquireScaleSetJobsOutput{})
		}, func(r *listenerRun) SetJob {
			return SetJob{OfferedAt: r.at(3), Acquire: &Acquisition{At: r.at(4), Outcome: AcquireNotGiven}}
		}},
		{"acquisition failing keeps the offer", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAvailable, job)
			r.failed(r.acquire(job), "503 service unavailable")
		}, func(r *listenerRun) SetJob {
			return SetJob{Place: SetOffered, OfferedAt: r.at(3), Acquire: &Acquisition{At: r.at(4), Outcome: AcquireFailed, Failure: "503 service unavailable"}}
		}},
		{"acquisition under way", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAvailable, job)
			r.acquire(job)
		}, func(r *listenerRun) SetJob {
			return SetJob{Place: SetOffered, OfferedAt: r.at(3), Acquire: &Acquisition{At: r.at(4), Outcome: AcquirePending}}
		}},
		{"assigned outright, then completed", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAssigned, job)
			r.poll(workflows.ScaleSetJobCompleted, job)
		}, func(*listenerRun) SetJob { return SetJob{Place: SetCompleted} }},
		{"assigned outright", func(r *listenerRun) {
			r.started()
			r.poll(workflows.ScaleSetJobAssigned, job)
		}, func(*listenerRun) SetJob { return SetJob{Place: SetAcquired} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &listenerRun{t: t, t0: t0}
			tt.steps(r)
			scan := newOfferScan(job)
			for _, ev := range r.events {
				scan.add(ev)
			}
			got, want := scan.out, tt.want(r)
			if got.Place != want.Place || !got.OfferedAt.Equal(want.OfferedAt) || got.OfferCarried != want.OfferCarried ||
				(got.Acquire == nil) != (want.Acquire == nil) || (got.Acquire != nil && *got.Acquire != *want.Acquire) {
				t.Errorf("got %+v (acquire %+v), want %+v (acquire %+v)", got, got.Acquire, want, want.Acquire)
			}
		})
	}
}
