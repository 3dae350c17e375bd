package activities

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/actions/scaleset"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/runnerflow/runnerflow/workflows"
)

// ScaleSetSessions are the message sessions this worker opened. The official client keeps a
// session's message-queue token in memory and cannot resume a session by id, so a session
// lives in the worker that opened it: its polls, acknowledgements and close run on that
// worker's own task queue, and a worker that is gone takes its sessions with it (the listener
// opens a new one; the service ends the old after minutes without a poll).
type ScaleSetSessions struct {
	mu       sync.Mutex
	sessions map[workflows.ScaleSetSessionRef]*scaleset.MessageSessionClient
}

// NewScaleSetSessions returns an empty registry.
func NewScaleSetSessions() *ScaleSetSessions {
	return &ScaleSetSessions{sessions: map[workflows.ScaleSetSessionRef]*scaleset.MessageSessionClient{}}
}

func (s *ScaleSetSessions) get(ref workflows.ScaleSetSessionRef) (*scaleset.MessageSessionClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.sessions[ref]; ok {
		return sc, nil
	}
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"message session %s of scale set %d is not held by this worker", ref.SessionID, ref.ScaleSetID), workflows.ErrSessionLost, nil)
}

func (s *ScaleSetSessions) put(ref workflows.ScaleSetSessionRef, sc *scaleset.MessageSessionClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[ref] = sc
}

func (s *ScaleSetSessions) drop(ref workflows.ScaleSetSessionRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, ref)
}

// RegisterListener registers the activities of this worker's own listener queue.
func (a *ScaleSetActivities) RegisterListener(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.PollScaleSet, activity.RegisterOptions{Name: workflows.ActivityPollScaleSet})
	r.RegisterActivityWithOptions(a.DeleteScaleSetMessage, activity.RegisterOptions{Name: workflows.ActivityDeleteScaleSetMessage})
	r.RegisterActivityWithOptions(a.CloseScaleSetSession, activity.RegisterOptions{Name: workflows.ActivityCloseScaleSetSession})
}

// OpenScaleSetSession opens the set's message session in this worker and names this worker's
// listener queue, where the session's other activities must go. A set another session holds
// answers SessionConflict (retried at the policy's pace).
func (a *ScaleSetActivities) OpenScaleSetSession(ctx context.Context, in workflows.OpenScaleSetSessionInput) (workflows.OpenScaleSetSessionOutput, error) {
	ctx, ans, c, err := a.client(ctx, in.Scope)
	if err != nil {
		return workflows.OpenScaleSetSessionOutput{}, err
	}
	sc, err := c.MessageSessionClient(ctx, int(in.ScaleSetID), in.Owner, a.Clients.httpOptions()...)
	if err != nil {
		return workflows.OpenScaleSetSessionOutput{}, a.classify(in.Scope, callOpenSession, err, ans)
	}
	sess := sc.Session()
	ref := workflows.ScaleSetSessionRef{ScaleSetID: in.ScaleSetID, SessionID: sess.SessionID.String()}
	a.Sessions.put(ref, sc)
	return workflows.OpenScaleSetSessionOutput{SessionID: ref.SessionID, TaskQueue: a.ListenerQueue, Statistics: statisticsOf(sess.Statistics)}, nil
}

// PollScaleSet long-polls the session's queue once, heartbeating while the service holds the
// poll. The client refreshes an expired message-queue token itself; a session the service no
// longer has is SessionLost.
func (a *ScaleSetActivities) PollScaleSet(ctx context.Context, in workflows.PollScaleSetInput) (workflows.PollScaleSetOutput, error) {
	sc, err := a.Sessions.get(in.Session)
	if err != nil {
		return workflows.PollScaleSetOutput{}, err
	}
	ctx, ans := withAnswer(ctx)
	type result struct {
		msg *scaleset.RunnerScaleSetMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := sc.GetMessage(ctx, int(in.LastMessageID), in.MaxCapacity)
		done <- result{msg, err}
	}()
	tick := time.NewTicker(workflows.ScaleSetPollHeartbeat)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				err := classifyActionsError(callSessionQueue, r.err, ans)
				if isErrType(err, workflows.ErrSessionLost) {
					a.Sessions.drop(in.Session)
				}
				return workflows.PollScaleSetOutput{}, err
			}
			return workflows.PollScaleSetOutput{Message: messageOf(r.msg)}, nil
		case <-tick.C:
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx)
			}
		}
	}
}

// DeleteScaleSetMessage acknowledges a message the pool now holds. A message the service no
// longer has was acknowledged already.
func (a *ScaleSetActivities) DeleteScaleSetMessage(ctx context.Context, in workflows.DeleteScaleSetMessageInput) error {
	sc, err := a.Sessions.get(in.Session)
	if err != nil {
		return err
	}
	ctx, ans := withAnswer(ctx)
	err = sc.DeleteMessage(ctx, int(in.MessageID))
	if status, _ := ans.last(); err != nil && status == http.StatusNotFound {
		return nil
	}
	return classifyActionsError(callSessionQueue, err, ans)
}

// CloseScaleSetSession ends the session at the service and forgets it. A session this worker
// does not hold (it restarted) is left to the service, which ends it after minutes unpolled.
func (a *ScaleSetActivities) CloseScaleSetSession(ctx context.Context, in workflows.CloseScaleSetSessionInput) error {
	sc, err := a.Sessions.get(in.Session)
	if isErrType(err, workflows.ErrSessionLost) {
		return nil
	}
	ctx, ans := withAnswer(ctx)
	err = classifyActionsError(callSessionQueue, sc.Close(ctx), ans)
	if err == nil || isErrType(err, workflows.ErrSessionLost) || isErrType(err, workflows.ErrScaleSetGone) {
		a.Sessions.drop(in.Session)
		return nil
	}
	return err
}

func statisticsOf(s *scaleset.RunnerScaleSetStatistic) workflows.ScaleSetStatistics {
	if s == nil {
		return workflows.ScaleSetStatistics{}
	}
	return workflows.ScaleSetStatistics{
		AvailableJobs: s.TotalAvailableJobs, AcquiredJobs: s.TotalAcquiredJobs, AssignedJobs: s.TotalAssignedJobs,
		RunningJobs: s.TotalRunningJobs, RegisteredRunners: s.TotalRegisteredRunners,
		BusyRunners: s.TotalBusyRunners, IdleRunners: s.TotalIdleRunners,
	}
}

// messageOf keeps what the pool needs of a message: ids, runners, results, statistics.
func messageOf(m *scaleset.RunnerScaleSetMessage) *workflows.ScaleSetMessage {
	if m == nil {
		return nil
	}
	out := &workflows.ScaleSetMessage{ID: int64(m.MessageID), Statistics: statisticsOf(m.Statistics)}
	event := func(kind string, b scaleset.JobMessageBase) workflows.ScaleSetJobEvent {
		return workflows.ScaleSetJobEvent{
			Event: kind, RunnerRequestID: b.RunnerRequestID, JobID: b.JobID,
			Repository: b.OwnerName + "/" + b.RepositoryName, Labels: b.RequestLabels,
		}
	}
	for _, j := range m.JobAssignedMessages {
		out.Jobs = append(out.Jobs, event(workflows.ScaleSetJobAssigned, j.JobMessageBase))
	}
	for _, j := range m.JobStartedMessages {
		e := event(workflows.ScaleSetJobStarted, j.JobMessageBase)
		e.RunnerID, e.RunnerName = int64(j.RunnerID), j.RunnerName
		out.Jobs = append(out.Jobs, e)
	}
	for _, j := range m.JobCompletedMessages {
		e := event(workflows.ScaleSetJobCompleted, j.JobMessageBase)
		e.RunnerID, e.RunnerName, e.Result = int64(j.RunnerID), j.RunnerName, j.Result
		out.Jobs = append(out.Jobs, e)
	}
	return out
}
