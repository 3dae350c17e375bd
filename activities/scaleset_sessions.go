package activities

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
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
	// leaving is closed when the worker begins to stop (Leave): from then on it opens no
	// session, a poll in flight ends, and a session it holds is closed at its listener's
	// next call here, answered SessionLost, so the listener opens the next one elsewhere.
	leaving chan struct{}
	left    bool
	// untold are the sessions held when the worker began to stop whose listener has not yet
	// been told that the session ended; told is closed once there are none.
	untold map[workflows.ScaleSetSessionRef]bool
	told   chan struct{}
}

// NewScaleSetSessions returns an empty registry.
func NewScaleSetSessions() *ScaleSetSessions {
	return &ScaleSetSessions{
		sessions: map[workflows.ScaleSetSessionRef]*scaleset.MessageSessionClient{},
		leaving:  make(chan struct{}), told: make(chan struct{}),
	}
}

// get is the session a call of its listener names. On a worker that is stopping, a session it
// still holds is handed over to be closed (leaving true): the caller closes it and answers
// SessionLost (closeLeaving).
func (s *ScaleSetSessions) get(ref workflows.ScaleSetSessionRef) (sc *scaleset.MessageSessionClient, leaving bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.sessions[ref]; ok {
		if s.left {
			delete(s.sessions, ref)
		}
		return sc, s.left, nil
	}
	// Expected after a restart under the same listener queue (a container restarted in its
	// pod): benign, the listener opens a new session.
	return nil, false, temporal.NewApplicationErrorWithOptions(fmt.Sprintf(
		"message session %s of scale set %d is not held by this worker", ref.SessionID, ref.ScaleSetID), workflows.ErrSessionLost,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}

// put keeps a session this worker opened; a worker that began stopping meanwhile keeps none
// and answers false (the caller closes the session).
func (s *ScaleSetSessions) put(ref workflows.ScaleSetSessionRef, sc *scaleset.MessageSessionClient) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left {
		return false
	}
	s.sessions[ref] = sc
	return true
}

func (s *ScaleSetSessions) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left
}

// Leave begins the worker's stop: it opens no session from now on, its polls in flight end
// by closing their sessions, and every other session it holds is closed at its listener's
// next call. Called before any of the worker's task queues closes, so a listener's next call
// still reaches this worker and learns its session ended at once (ListenersTold).
func (s *ScaleSetSessions) Leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left {
		return
	}
	s.left = true
	close(s.leaving)
	s.untold = map[workflows.ScaleSetSessionRef]bool{}
	for ref := range s.sessions {
		s.untold[ref] = true
	}
	if len(s.untold) == 0 {
		close(s.told)
	}
}

// ListenersTold waits until every session held when the worker began to leave is closed and
// its listener told (its call here answered SessionLost), or ctx ends; it says which. Only
// then may the worker's listener queue close: a listener whose call finds no worker there
// waits out the poll's ScheduleToStart before it opens a new session.
func (s *ScaleSetSessions) ListenersTold(ctx context.Context) bool {
	select {
	case <-s.told:
		return true
	case <-ctx.Done():
		return false
	}
}

// tell notes that a session's listener has been told the session ended.
func (s *ScaleSetSessions) tell(ref workflows.ScaleSetSessionRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.untold[ref] {
		return
	}
	delete(s.untold, ref)
	if len(s.untold) == 0 {
		close(s.told)
	}
}

// CloseAll ends every session this worker still holds at the service, so the listeners'
// next sessions, opened on the workers that remain, are not refused (409) for the minutes
// the service would keep an abandoned one. Called once the worker's task queues are closed;
// a session whose close fails is left to the service. It answers how many it closed.
func (s *ScaleSetSessions) CloseAll(ctx context.Context) int {
	s.mu.Lock()
	s.left = true
	held := s.sessions
	s.sessions = map[workflows.ScaleSetSessionRef]*scaleset.MessageSessionClient{}
	s.mu.Unlock()
	var closed atomic.Int64
	var wg sync.WaitGroup
	for _, sc := range held {
		wg.Go(func() {
			if sc.Close(ctx) == nil {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(closed.Load())
}

// drop forgets a session its listener is told is lost.
func (s *ScaleSetSessions) drop(ref workflows.ScaleSetSessionRef) {
	s.mu.Lock()
	delete(s.sessions, ref)
	s.mu.Unlock()
	s.tell(ref)
}

// RegisterListener registers the activities of this worker's own listener queue.
func (a *ScaleSetActivities) RegisterListener(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.PollScaleSet, activity.RegisterOptions{Name: workflows.ActivityPollScaleSet})
	r.RegisterActivityWithOptions(a.DeleteScaleSetMessage, activity.RegisterOptions{Name: workflows.ActivityDeleteScaleSetMessage})
	r.RegisterActivityWithOptions(a.CloseScaleSetSession, activity.RegisterOptions{Name: workflows.ActivityCloseScaleSetSession})
	r.RegisterActivityWithOptions(a.AcquireScaleSetJobs, activity.RegisterOptions{Name: workflows.ActivityAcquireScaleSetJobs})
}

// errWorkerStopping: this worker is shutting down; the session's listener opens its next
// session on another worker. Benign: a deploy is not an error.
func errWorkerStopping(what string) error {
	return temporal.NewApplicationErrorWithOptions(what+": this worker is stopping", workflows.ErrSessionLost,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}

// errOpenOnStoppingWorker refuses to open a session on a worker that is stopping: the open is
// retried and taken by a worker that stays.
func errOpenOnStoppingWorker() error {
	return temporal.NewApplicationErrorWithOptions("open message session: this worker is stopping", workflows.ErrTransient,
		temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
}

// session is the session a call names; on a worker that is stopping it closes the session and
// answers SessionLost instead, so the listener opens its next one on a worker that stays.
func (a *ScaleSetActivities) session(ref workflows.ScaleSetSessionRef, what string) (*scaleset.MessageSessionClient, error) {
	sc, leaving, err := a.Sessions.get(ref)
	if err != nil {
		return nil, err
	}
	if leaving {
		a.closeLeaving(ref, sc)
		return nil, errWorkerStopping(what)
	}
	return sc, nil
}

// OpenScaleSetSession opens the set's message session in this worker and names this worker's
// listener queue, where the session's other activities must go. A set another session holds
// answers SessionConflict (retried at the policy's pace).
func (a *ScaleSetActivities) OpenScaleSetSession(ctx context.Context, in workflows.OpenScaleSetSessionInput) (workflows.OpenScaleSetSessionOutput, error) {
	if a.Sessions.isStopping() {
		return workflows.OpenScaleSetSessionOutput{}, errOpenOnStoppingWorker()
	}
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
	if !a.Sessions.put(ref, sc) {
		_ = sc.Close(ctx) // opened as the worker began stopping: nobody here would poll it
		return workflows.OpenScaleSetSessionOutput{}, errOpenOnStoppingWorker()
	}
	return workflows.OpenScaleSetSessionOutput{SessionID: ref.SessionID, TaskQueue: a.ListenerQueue, Statistics: statisticsOf(sess.Statistics)}, nil
}

// PollScaleSet long-polls the session's queue once, heartbeating while the service holds the
// poll. The client refreshes an expired message-queue token itself; a session the service no
// longer has is SessionLost.
func (a *ScaleSetActivities) PollScaleSet(ctx context.Context, in workflows.PollScaleSetInput) (workflows.PollScaleSetOutput, error) {
	sc, err := a.session(in.Session, "poll")
	if err != nil {
		return workflows.PollScaleSetOutput{}, err
	}
	ctx, ans := withAnswer(ctx)
	type result struct {
		msg *scaleset.RunnerScaleSetMessage
		err error
	}
	done := make(chan result, 1)
	pollCtx, cancelPoll := context.WithCancel(ctx)
	defer cancelPoll()
	go func() {
		msg, err := sc.GetMessage(pollCtx, int(in.LastMessageID), in.MaxCapacity)
		done <- result{msg, err}
	}()
	tick := time.NewTicker(workflows.ScaleSetPollHeartbeat)
	defer tick.Stop()
	var workerStop <-chan struct{}
	if activity.IsActivity(ctx) {
		workerStop = activity.GetWorkerStopChannel(ctx)
	}
	for {
		select {
		case <-workerStop:
		case <-a.Sessions.leaving:
		case r := <-done:
			if m := ans.lastMessage(); r.err != nil && m.ID > 0 && m.Type != jobMessagesType {
				return workflows.PollScaleSetOutput{}, a.skipUnknownMessage(ctx, sc, m)
			}
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
			continue
		}
		// A deploy: end the session here and now, so the listener's next one, opened on a
		// worker that stays, is served at once instead of refused for minutes. The client
		// holds the session during a poll: the poll ends first. A message it got meanwhile
		// is not lost: the next session gets every unacknowledged one.
		cancelPoll()
		<-done
		a.closeLeaving(in.Session, sc)
		return workflows.PollScaleSetOutput{}, errWorkerStopping("poll")
	}
}

// jobMessagesType is the one message type the client reads.
const jobMessagesType = "RunnerScaleSetJobMessages"

// skipUnknownMessage deletes a message of a type the client cannot read, so it does not come
// back to every poll of every session and leave the set deaf; the poll then answers no message
// and the next poll goes on past it.
func (a *ScaleSetActivities) skipUnknownMessage(ctx context.Context, sc *scaleset.MessageSessionClient, m queueMessage) error {
	ctx, ans := withAnswer(ctx)
	err := sc.DeleteMessage(ctx, int(m.ID))
	if status, _ := ans.last(); err != nil && status != http.StatusNotFound {
		return classifyActionsError(callSessionQueue, err, ans)
	}
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("Scale-set message of a type the client cannot read skipped", "messageID", m.ID, "messageType", m.Type)
	}
	return nil
}

// closeLeaving closes a session as its worker stops and forgets it, its listener about to be
// told. The call's own context ends with the worker, so the close has a short one of its own.
func (a *ScaleSetActivities) closeLeaving(ref workflows.ScaleSetSessionRef, sc *scaleset.MessageSessionClient) {
	ctx, cancel := context.WithTimeout(context.Background(), ScaleSetSessionCloseTimeout)
	defer cancel()
	_ = sc.Close(ctx) // a close that fails leaves the session to the service's timeout
	a.Sessions.drop(ref)
}

// ScaleSetSessionCloseTimeout bounds closing a session while a worker stops: a few of the
// service's round trips, well inside the worker's stop timeout.
const ScaleSetSessionCloseTimeout = 5 * time.Second

// AcquireScaleSetJobs acquires jobs the set was offered (GHES's flow) and answers those the
// set now holds. Acquiring a job the set holds already, or one another listener took, is
// harmless: the service answers only what this call acquired.
func (a *ScaleSetActivities) AcquireScaleSetJobs(ctx context.Context, in workflows.AcquireScaleSetJobsInput) (workflows.AcquireScaleSetJobsOutput, error) {
	sc, err := a.session(in.Session, "acquire jobs")
	if err != nil {
		return workflows.AcquireScaleSetJobsOutput{}, err
	}
	ctx, ans := withAnswer(ctx)
	ids, err := sc.AcquireJobs(ctx, in.RunnerRequestIDs)
	if err != nil {
		err = classifyActionsError(callSessionQueue, err, ans)
		if isErrType(err, workflows.ErrSessionLost) {
			a.Sessions.drop(in.Session)
		}
		return workflows.AcquireScaleSetJobsOutput{}, err
	}
	return workflows.AcquireScaleSetJobsOutput{Acquired: ids}, nil
}

// DeleteScaleSetMessage acknowledges a message the pool now holds. A message the service no
// longer has was acknowledged already.
func (a *ScaleSetActivities) DeleteScaleSetMessage(ctx context.Context, in workflows.DeleteScaleSetMessageInput) error {
	sc, err := a.session(in.Session, "acknowledge message")
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
	sc, err := a.session(in.Session, "close")
	if isErrType(err, workflows.ErrSessionLost) {
		return nil // not held here, or closed as this worker stops
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
	for _, j := range m.JobAvailableMessages {
		out.Jobs = append(out.Jobs, event(workflows.ScaleSetJobAvailable, j.JobMessageBase))
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
