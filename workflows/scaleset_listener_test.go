package workflows

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// listenerWorld runs ScaleSetListenerWorkflow against fake scale-set activities: polls answer
// from a script, and every call is recorded in order.
type listenerWorld struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	ended []ScaleSetListenerEnded
	polls []func() (PollScaleSetOutput, error)
	// acquire answers an acquisition; nil acquires every job asked.
	acquire func(AcquireScaleSetJobsInput) (AcquireScaleSetJobsOutput, error)
	calls   []string
	// sessionStats are the opening statistics handed to the pool, one per session.
	sessionStats []ScaleSetSessionOpened
	// handed are the messages handed to the pool, in order.
	handed []ScaleSetMessageSignal
	opened int
	seen   []PollScaleSetInput
	queues []string
}

func newListenerWorld(t *testing.T) *listenerWorld {
	var s testsuite.WorkflowTestSuite
	w := &listenerWorld{t: t, env: s.NewTestWorkflowEnvironment()}
	w.env.RegisterWorkflowWithOptions(ScaleSetListenerWorkflow, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
	w.env.RegisterActivityWithOptions(func(context.Context, OpenScaleSetSessionInput) (OpenScaleSetSessionOutput, error) {
		w.opened++
		w.calls = append(w.calls, "open")
		return OpenScaleSetSessionOutput{SessionID: "s" + string(rune('0'+w.opened)), TaskQueue: ScaleSetListenerTaskQueue("w1"),
			Statistics: ScaleSetStatistics{AssignedJobs: w.opened}}, nil
	}, activity.RegisterOptions{Name: ActivityOpenScaleSetSession})
	w.env.RegisterActivityWithOptions(func(ctx context.Context, in PollScaleSetInput) (PollScaleSetOutput, error) {
		w.seen = append(w.seen, in)
		w.queues = append(w.queues, activity.GetInfo(ctx).TaskQueue)
		w.calls = append(w.calls, "poll")
		if len(w.polls) == 0 {
			return PollScaleSetOutput{}, nil
		}
		next := w.polls[0]
		w.polls = w.polls[1:]
		return next()
	}, activity.RegisterOptions{Name: ActivityPollScaleSet})
	w.env.RegisterActivityWithOptions(func(_ context.Context, in DeleteScaleSetMessageInput) error {
		w.calls = append(w.calls, "delete "+in.Session.SessionID)
		return nil
	}, activity.RegisterOptions{Name: ActivityDeleteScaleSetMessage})
	w.env.RegisterActivityWithOptions(func(_ context.Context, in CloseScaleSetSessionInput) error {
		w.calls = append(w.calls, "close "+in.Session.SessionID)
		return nil
	}, activity.RegisterOptions{Name: ActivityCloseScaleSetSession})
	w.env.RegisterActivityWithOptions(func(_ context.Context, in AcquireScaleSetJobsInput) (AcquireScaleSetJobsOutput, error) {
		w.calls = append(w.calls, fmt.Sprintf("acquire %v", in.RunnerRequestIDs))
		if w.acquire != nil {
			return w.acquire(in)
		}
		return AcquireScaleSetJobsOutput{Acquired: in.RunnerRequestIDs}, nil
	}, activity.RegisterOptions{Name: ActivityAcquireScaleSetJobs})
	w.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID("ss"), "", SignalScaleSetMessage, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			w.calls = append(w.calls, "hand over")
			w.handed = append(w.handed, arg.(ScaleSetMessageSignal))
			return nil
		})
	w.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID("ss"), "", SignalScaleSetSessionOpened, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			w.sessionStats = append(w.sessionStats, arg.(ScaleSetSessionOpened))
			return nil
		})
	w.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID("ss"), "", SignalScaleSetListenerEnded, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			w.ended = append(w.ended, arg.(ScaleSetListenerEnded))
			return nil
		})
	return w
}

func message(id int64) func() (PollScaleSetOutput, error) {
	return func() (PollScaleSetOutput, error) {
		return PollScaleSetOutput{Message: &ScaleSetMessage{ID: id, Jobs: []ScaleSetJobEvent{{Event: ScaleSetJobAssigned, RunnerRequestID: id}}}}, nil
	}
}

func failing(err error) func() (PollScaleSetOutput, error) {
	return func() (PollScaleSetOutput, error) { return PollScaleSetOutput{}, err }
}

// run runs the listener for polls polls and returns the state it continued as new with.
func (w *listenerWorld) run(in ScaleSetListenerInput, polls int) ScaleSetListenerState {
	w.t.Helper()
	in.Pool, in.ScaleSetID, in.MaxCapacity, in.ContinueAsNewAfter = "ss", 5, 10, polls
	in.Scope = Scope{Organization: "acme"}
	w.env.ExecuteWorkflow(ScaleSetListenerWorkflowType, in)
	var can *workflow.ContinueAsNewError
	if err := w.env.GetWorkflowError(); !errors.As(err, &can) {
		w.t.Fatalf("the listener ended with %v, want it to continue as new", err)
	}
	var next ScaleSetListenerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil || next.State == nil {
		w.t.Fatalf("continue-as-new input: %+v, %v", next, err)
	}
	return *next.State
}

func TestScaleSetListenerHandsAMessageOverBeforeDeletingIt(t *testing.T) {
	w := newListenerWorld(t)
	w.polls = []func() (PollScaleSetOutput, error){message(1), message(2)}
	st := w.run(ScaleSetListenerInput{}, 3)
	want := []string{"open", "poll", "hand over", "delete s1", "poll", "hand over", "delete s1", "poll"}
	if len(w.calls) != len(want) {
		t.Fatalf("calls = %v, want %v", w.calls, want)
	}
	for i := range want {
		if w.calls[i] != want[i] {
			t.Fatalf("calls = %v, want %v", w.calls, want)
		}
	}
	if st.LastMessageID != 2 || st.Session == nil || st.Session.SessionID != "s1" {
		t.Errorf("state = %+v, want message 2 and session s1 kept", st)
	}
	if w.seen[1].LastMessageID != 1 || w.seen[2].LastMessageID != 2 || w.seen[0].MaxCapacity != 10 {
		t.Errorf("polls asked after %d, %d (capacity %d); want the cursor kept", w.seen[1].LastMessageID, w.seen[2].LastMessageID, w.seen[0].MaxCapacity)
	}
	for _, q := range w.queues {
		if q != ScaleSetListenerTaskQueue("w1") {
			t.Errorf("a poll ran on %q, want the session's worker queue", q)
		}
	}
}

func TestScaleSetListenerResumesFromItsState(t *testing.T) {
	w := newListenerWorld(t)
	carried := ScaleSetListenerState{Session: &OpenScaleSetSessionOutput{SessionID: "old", TaskQueue: ScaleSetListenerTaskQueue("w1")}, LastMessageID: 41}
	st := w.run(ScaleSetListenerInput{State: &carried}, 1)
	if w.opened != 0 || w.seen[0].LastMessageID != 41 || w.seen[0].Session.SessionID != "old" {
		t.Errorf("opened %d sessions, polled %+v; want the carried session and cursor", w.opened, w.seen[0])
	}
	if st.LastMessageID != 41 {
		t.Errorf("state = %+v, want the cursor kept", st)
	}
}

func TestScaleSetListenerOpensANewSessionWhenItsSessionIsLost(t *testing.T) {
	w := newListenerWorld(t)
	lost := temporal.NewNonRetryableApplicationError("session gone", ErrSessionLost, nil)
	w.polls = []func() (PollScaleSetOutput, error){message(1), failing(lost), message(1)}
	st := w.run(ScaleSetListenerInput{}, 3)
	if w.opened != 2 || st.Session == nil || st.Session.SessionID != "s2" {
		t.Errorf("opened %d sessions, state %+v; want a second session", w.opened, st)
	}
	// Each session's opening statistics reach the pool.
	if len(w.sessionStats) != 2 || w.sessionStats[1].SessionID != "s2" || w.sessionStats[1].Statistics.AssignedJobs != 2 || w.sessionStats[1].ScaleSetID != 5 {
		t.Errorf("statistics handed over = %+v, want each session's", w.sessionStats)
	}
	// The message came again under the new session and was handed over again: the pool
	// counts it once (ApplyScaleSetMessage).
	if st.LastMessageID != 1 {
		t.Errorf("cursor = %d, want 1", st.LastMessageID)
	}
}

// TestScaleSetListenerClosesASessionItGivesUpOn: a poll failing past its retries makes the
// listener close its session (so the next is not refused) and open another.
func TestScaleSetListenerClosesASessionItGivesUpOn(t *testing.T) {
	w := newListenerWorld(t)
	// Non-retryable here stands for the poll's last retry failing.
	unwell := temporal.NewNonRetryableApplicationError("502 from the service", ErrTransient, nil)
	w.polls = []func() (PollScaleSetOutput, error){failing(unwell)}
	st := w.run(ScaleSetListenerInput{}, 2)
	want := []string{"open", "poll", "close s1", "open", "poll"}
	if len(w.calls) < len(want) || w.calls[2] != want[2] || w.calls[3] != want[3] || w.opened != 2 {
		t.Errorf("calls = %v, want %v", w.calls, want)
	}
	if st.Session == nil || st.Session.SessionID != "s2" {
		t.Errorf("state = %+v, want the second session", st)
	}
}

func TestScaleSetListenerEndsWhenTheSetIsGone(t *testing.T) {
	w := newListenerWorld(t)
	gone := temporal.NewNonRetryableApplicationError("set gone", ErrScaleSetGone, nil)
	w.polls = []func() (PollScaleSetOutput, error){failing(gone)}
	w.env.ExecuteWorkflow(ScaleSetListenerWorkflowType, ScaleSetListenerInput{Pool: "ss", ScaleSetID: 5, Scope: Scope{Organization: "acme"}})
	if err := w.env.GetWorkflowError(); !isType(err, ErrScaleSetGone) {
		t.Errorf("the listener ended with %v, want ScaleSetGone for the pool to recreate the set", err)
	}
	if len(w.ended) != 1 || !w.ended[0].Gone || w.ended[0].ScaleSetID != 5 {
		t.Errorf("the pool was told %+v, want one end of set 5, gone", w.ended)
	}
}

func offers(id int64, assigned int, jobs ...int64) func() (PollScaleSetOutput, error) {
	return func() (PollScaleSetOutput, error) {
		return PollScaleSetOutput{Message: &ScaleSetMessage{ID: id, Jobs: offered(jobs...), Statistics: ScaleSetStatistics{AssignedJobs: assigned}}}, nil
	}
}

// TestScaleSetListenerAcquiresOffersItHasRoomFor: offered jobs are acquired on the session's
// worker before the message is handed over, no more than the set's maximum allows; the rest
// wait for a message that shows room.
func TestScaleSetListenerAcquiresOffersItHasRoomFor(t *testing.T) {
	w := newListenerWorld(t)
	// The maximum is 10: 8 jobs held leave room for two of the three offers.
	w.polls = []func() (PollScaleSetOutput, error){offers(1, 8, 3, 1, 2), offers(2, 9)}
	st := w.run(ScaleSetListenerInput{}, 2)
	want := []string{"open", "poll", "acquire [1 2]", "hand over", "delete s1", "poll", "acquire [3]", "hand over", "delete s1"}
	if !slices.Equal(w.calls, want) {
		t.Errorf("calls = %v, want %v", w.calls, want)
	}
	if len(st.Offered) != 0 {
		t.Errorf("offers kept = %v, want none", st.Offered)
	}
}

// TestScaleSetListenerHandsOverTheJobsItAcquired: the jobs the service answered as acquired
// go to the pool with the message that led to their acquisition, not only later with their
// assigned messages; a job the service left out of its answer (another set acquired it, or it
// was cancelled) does not. A listener of a history from before the change hands the message
// alone.
func TestScaleSetListenerHandsOverTheJobsItAcquired(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version workflow.Version
		want    [][]int64
	}{
		{"with the message", 1, [][]int64{{1, 3}, nil}},
		{"before the change", workflow.DefaultVersion, [][]int64{nil, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newListenerWorld(t)
			w.env.OnGetVersion(changeScaleSetHandOverAcquired, workflow.DefaultVersion, 1).Return(tc.version)
			w.acquire = func(in AcquireScaleSetJobsInput) (AcquireScaleSetJobsOutput, error) {
				return AcquireScaleSetJobsOutput{Acquired: slices.DeleteFunc(slices.Clone(in.RunnerRequestIDs), func(id int64) bool { return id == 2 })}, nil
			}
			w.polls = []func() (PollScaleSetOutput, error){offers(1, 0, 1, 2, 3), message(2)}
			w.run(ScaleSetListenerInput{}, 2)
			var got [][]int64
			for _, sig := range w.handed {
				got = append(got, sig.Acquired)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("acquired handed over = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScaleSetListenerKeepsOffersItFailedToAcquire: an acquisition that fails keeps its
// offers for the next message, and a session lost meanwhile leaves the message unacknowledged
// for the next session.
func TestScaleSetListenerKeepsOffersItFailedToAcquire(t *testing.T) {
	w := newListenerWorld(t)
	w.acquire = func(AcquireScaleSetJobsInput) (AcquireScaleSetJobsOutput, error) {
		w.acquire = nil
		return AcquireScaleSetJobsOutput{}, temporal.NewNonRetryableApplicationError("session gone", ErrSessionLost, nil)
	}
	w.polls = []func() (PollScaleSetOutput, error){offers(1, 0, 7), offers(1, 0, 7)}
	st := w.run(ScaleSetListenerInput{}, 2)
	want := []string{"open", "poll", "acquire [7]", "open", "poll", "acquire [7]", "hand over", "delete s2"}
	if !slices.Equal(w.calls, want) {
		t.Errorf("calls = %v, want %v", w.calls, want)
	}
	if len(st.Offered) != 0 || st.LastMessageID != 1 {
		t.Errorf("state = %+v, want the offer acquired and message 1 handed over", st)
	}
}

// TestScaleSetListenerReadsCapacityBeforeContinuingAsNew: a maximum the pool sends during
// the run's last poll is carried into the next run, not lost with this one.
func TestScaleSetListenerReadsCapacityBeforeContinuingAsNew(t *testing.T) {
	w := newListenerWorld(t)
	w.polls = []func() (PollScaleSetOutput, error){func() (PollScaleSetOutput, error) {
		w.env.SignalWorkflow(SignalScaleSetCapacity, ScaleSetCapacity{MaxCapacity: 3})
		return PollScaleSetOutput{}, nil
	}}
	in := ScaleSetListenerInput{Pool: "ss", ScaleSetID: 5, MaxCapacity: 10, ContinueAsNewAfter: 1, Scope: Scope{Organization: "acme"}}
	w.env.ExecuteWorkflow(ScaleSetListenerWorkflowType, in)
	var can *workflow.ContinueAsNewError
	if err := w.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("the listener ended with %v, want it to continue as new", err)
	}
	var next ScaleSetListenerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.MaxCapacity != 3 {
		t.Errorf("the next run reports a maximum of %d, want the 3 sent during the last poll", next.MaxCapacity)
	}
}

// TestScaleSetListenerClosesASessionWhosePollTimedOut: a poll that started and then timed
// out leaves a session its worker may still hold: the listener closes it there before
// opening another. One that found no worker (schedule-to-start) has no one to close it.
func TestScaleSetListenerClosesASessionWhosePollTimedOut(t *testing.T) {
	for _, tt := range []struct {
		timeout enumspb.TimeoutType
		want    []string
	}{
		{enumspb.TIMEOUT_TYPE_HEARTBEAT, []string{"open", "poll", "close s1", "open", "poll"}},
		{enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, []string{"open", "poll", "open", "poll"}},
	} {
		t.Run(tt.timeout.String(), func(t *testing.T) {
			w := newListenerWorld(t)
			// A timeout is retried by the poll's policy: every attempt times out.
			for range ScaleSetPollPolicy.RetryPolicy.MaximumAttempts {
				w.polls = append(w.polls, failing(temporal.NewTimeoutError(tt.timeout, nil)))
			}
			w.run(ScaleSetListenerInput{}, 2)
			got := slices.DeleteFunc(slices.Clone(w.calls), func(c string) bool { return c == "poll" })
			want := slices.DeleteFunc(slices.Clone(tt.want), func(c string) bool { return c == "poll" })
			if !slices.Equal(got, want) {
				t.Errorf("calls = %v, want %v", w.calls, tt.want)
			}
		})
	}
}
