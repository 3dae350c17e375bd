package workflows

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// changeScaleSetAcquireOffers gates acquiring the jobs a set is offered (GHES's flow): before
// it the listener handed offers over unacquired, and the service never assigned them.
const changeScaleSetAcquireOffers = "scaleset-acquire-offers"

// changeScaleSetCapacityDrained gates reading the pool's capacity signals once more before
// continuing as new: before it a maximum sent during the last poll died with the run.
const changeScaleSetCapacityDrained = "scaleset-capacity-drained"

// changeScaleSetCloseTimedOut gates closing a session whose poll timed out on a worker that
// still serves its queue: before it the session was dropped open, and the next one was
// refused (409) until the service timed the old one out.
const changeScaleSetCloseTimedOut = "scaleset-close-timed-out"

// changeScaleSetSessionStatistics gates handing the pool the statistics a session opens with
// (before it they were dropped, and a set adopted with jobs assigned waited for a message),
// and starting each session's cursor afresh.
const changeScaleSetSessionStatistics = "scaleset-session-statistics"

// changeScaleSetHandOverAcquired gates handing the pool, with a message, the jobs the listener
// acquired after reading it: before it the pool learned of them only from their assigned
// messages, which can wait behind the rest of a burst's offers.
const changeScaleSetHandOverAcquired = "scaleset-hand-over-acquired"

// ScaleSetListenerWorkflow holds a scale set's message session and hands every message to the
// pool durably (a signal the server has accepted) before deleting it at the service. Its
// session and last message id are workflow state, so a worker's restart loses neither; a
// session the service no longer has, or one held by a worker that is gone, is replaced by a
// new one (the service delivers the undeleted messages again, and the pool counts them once).
// It ends with ScaleSetGone when GitHub deleted the set: the pool creates it again.
func ScaleSetListenerWorkflow(ctx workflow.Context, in ScaleSetListenerInput) (ScaleSetListenerResult, error) {
	l := &scaleSetListener{ctx: ctx, in: in}
	if in.State != nil {
		l.st = *in.State
	}
	res, err := l.run()
	var can *workflow.ContinueAsNewError
	if err != nil && !errors.As(err, &can) {
		l.tellPoolEnded(err)
	}
	return res, err
}

// tellPoolEnded tells the pool the listener is ending, so it creates the set again or starts
// another listener. Best effort: a pool that is gone needs no telling.
func (l *scaleSetListener) tellPoolEnded(cause error) {
	ended := ScaleSetListenerEnded{ScaleSetID: l.in.ScaleSetID, Gone: isType(cause, ErrScaleSetGone), Reason: cause.Error()}
	err := workflow.SignalExternalWorkflow(l.ctx, PoolWorkflowID(l.in.Pool), "", SignalScaleSetListenerEnded, ended).Get(l.ctx, nil)
	if err != nil {
		workflow.GetLogger(l.ctx).Warn("Pool not told of the listener's end", "pool", l.in.Pool, "error", err)
	}
}

type scaleSetListener struct {
	ctx   workflow.Context
	in    ScaleSetListenerInput
	st    ScaleSetListenerState
	polls int
}

func (l *scaleSetListener) run() (ScaleSetListenerResult, error) {
	for {
		l.readCapacity()
		if err := l.ensureSession(); err != nil {
			return l.result(), err
		}
		msg, err := l.poll()
		if err != nil {
			return l.result(), err
		}
		var acquired []int64
		if msg != nil {
			acquired = l.acquireOffers(*msg)
		}
		if msg != nil && l.st.Session != nil {
			if err := l.handOver(*msg, acquired); err != nil {
				return l.result(), err
			}
			l.acknowledge(msg.ID)
		}
		if l.shouldContinueAsNew() {
			return l.result(), l.continueAsNew()
		}
	}
}

// readCapacity takes the newest maximum the pool sent, reported with the next poll and
// carried across continue-as-new.
func (l *scaleSetListener) readCapacity() {
	capacity := workflow.GetSignalChannel(l.ctx, SignalScaleSetCapacity)
	var c ScaleSetCapacity
	for capacity.ReceiveAsync(&c) {
		l.in.MaxCapacity = c.MaxCapacity
	}
}

// continueAsNew carries the listener's place into a new run, with every capacity signal the
// pool sent meanwhile read first: a signal left in the channel would die with this run, and
// the pool, believing it delivered, would not send it again.
func (l *scaleSetListener) continueAsNew() error {
	if workflow.GetVersion(l.ctx, changeScaleSetCapacityDrained, workflow.DefaultVersion, 1) >= 1 {
		l.readCapacity()
	}
	next := l.in
	st := l.st
	next.State = &st
	return workflow.NewContinueAsNewError(onDecisionQueue(l.ctx, askListenerDecidesApart), ScaleSetListenerWorkflowType, next)
}

// acquireOffers acquires the jobs the set was offered, as many as it has room for (GHES offers
// jobs and assigns them only once acquired; github.com assigns them outright, and its messages
// hold no offers), and returns those the service answered as acquired. The jobs acquired come
// back as assigned messages too, which the pool counts once; offers left for lack of room, or
// because the acquisition failed, are tried with a later message. A session lost meanwhile
// leaves the message unacknowledged: the next session gets it again.
func (l *scaleSetListener) acquireOffers(msg ScaleSetMessage) []int64 {
	plan := PlanScaleSetAcquisition(l.st.Offered, msg, l.in.MaxCapacity)
	if len(plan.Acquire) == 0 {
		l.st.Offered = plan.Keep
		return nil
	}
	if workflow.GetVersion(l.ctx, changeScaleSetAcquireOffers, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	opts := ScaleSetSessionCallPolicy
	opts.TaskQueue = l.st.Session.TaskQueue
	ctx := workflow.WithActivityOptions(l.ctx, opts)
	var out AcquireScaleSetJobsOutput
	err := workflow.ExecuteActivity(ctx, ActivityAcquireScaleSetJobs, AcquireScaleSetJobsInput{
		Session: l.sessionRef(), RunnerRequestIDs: plan.Acquire,
	}).Get(ctx, &out)
	if err == nil {
		l.st.Offered = plan.Keep
		return out.Acquired
	}
	l.st.Offered = plan.Keep
	for _, id := range plan.Acquire {
		l.st.Offered = insertSorted(l.st.Offered, id)
	}
	if sessionLost(err) {
		l.st.Session = nil
		return nil
	}
	workflow.GetLogger(l.ctx).Warn("Offered scale-set jobs not acquired; tried again with the next message",
		"pool", l.in.Pool, "jobs", len(plan.Acquire), "error", err)
	return nil
}

func (l *scaleSetListener) result() ScaleSetListenerResult {
	return ScaleSetListenerResult{LastMessageID: l.st.LastMessageID}
}

// ensureSession opens a session when none is held; a session another listener holds is
// waited out by ScaleSetSessionOpenPolicy's retries.
func (l *scaleSetListener) ensureSession() error {
	if l.st.Session != nil {
		return nil
	}
	ctx := workflow.WithActivityOptions(l.ctx, ScaleSetSessionOpenPolicy)
	var out OpenScaleSetSessionOutput
	err := workflow.ExecuteActivity(ctx, ActivityOpenScaleSetSession, OpenScaleSetSessionInput{
		Scope: l.in.Scope, ScaleSetID: l.in.ScaleSetID, Owner: ScaleSetListenerWorkflowID(l.in.Pool, l.in.ScaleSetID),
	}).Get(ctx, &out)
	if err != nil {
		return err
	}
	l.st.Session = &out
	if workflow.GetVersion(l.ctx, changeScaleSetSessionStatistics, workflow.DefaultVersion, 1) >= 1 {
		// A session's cursor starts afresh: should the service number each session's messages
		// from 1, the last session's cursor would pass over the new one's first messages.
		// Under one numbering across sessions this costs nothing: the listener acknowledges
		// each message before its next poll, so only the last one handed over may come again,
		// and the pool counts it once.
		l.st.LastMessageID = 0
		l.handOverStatistics(out)
	}
	return nil
}

// handOverStatistics signals the pool the statistics its new session opened with. Best
// effort: the next message carries them too.
func (l *scaleSetListener) handOverStatistics(sess OpenScaleSetSessionOutput) {
	err := workflow.SignalExternalWorkflow(l.ctx, PoolWorkflowID(l.in.Pool), "", SignalScaleSetSessionOpened,
		ScaleSetSessionOpened{ScaleSetID: l.in.ScaleSetID, SessionID: sess.SessionID, Statistics: sess.Statistics}).Get(l.ctx, nil)
	if err != nil {
		workflow.GetLogger(l.ctx).Warn("Pool not told of the session's statistics", "pool", l.in.Pool, "error", err)
	}
}

func (l *scaleSetListener) sessionRef() ScaleSetSessionRef {
	return ScaleSetSessionRef{ScaleSetID: l.in.ScaleSetID, SessionID: l.st.Session.SessionID}
}

// poll long-polls once on the session's worker. A session that is lost (ended at the
// service, or its worker gone: the task found no poller) is dropped, to be opened again.
func (l *scaleSetListener) poll() (*ScaleSetMessage, error) {
	opts := ScaleSetPollPolicy
	opts.TaskQueue = l.st.Session.TaskQueue
	ctx := workflow.WithActivityOptions(l.ctx, opts)
	l.polls++
	var out PollScaleSetOutput
	err := workflow.ExecuteActivity(ctx, ActivityPollScaleSet, PollScaleSetInput{
		Session: l.sessionRef(), LastMessageID: l.st.LastMessageID, MaxCapacity: l.in.MaxCapacity,
	}).Get(ctx, &out)
	switch {
	case err == nil:
		return out.Message, nil
	case isType(err, ErrScaleSetGone):
		return nil, err
	case timedOutOnLiveWorker(err) &&
		workflow.GetVersion(l.ctx, changeScaleSetCloseTimedOut, workflow.DefaultVersion, 1) >= 1:
		// The worker still serves the session's queue (the poll started, then stalled): close
		// the session there, so the next one is not refused while the service keeps it.
		l.abandonSession()
	case !sessionLost(err):
		// The service kept failing past the poll's retries: start again with a new session
		// (opening one backs off under its own policy) rather than end the listener.
		workflow.GetLogger(l.ctx).Warn("Scale-set poll failed; opening a new session", "pool", l.in.Pool, "error", err)
		l.abandonSession()
	}
	l.st.Session = nil
	return nil, nil
}

// timedOutOnLiveWorker: the poll started on the session's worker and then timed out (no
// heartbeat, or past its start-to-close), rather than finding no worker at all
// (schedule-to-start), whose session is beyond reach.
func timedOutOnLiveWorker(err error) bool {
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() != enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// abandonSession closes a session the listener gives up on while its worker may still hold
// it, so the next one is not refused (409) until the service times the old one out. Best
// effort: a close that fails leaves that to the service.
func (l *scaleSetListener) abandonSession() {
	opts := ScaleSetSessionCallPolicy
	opts.TaskQueue = l.st.Session.TaskQueue
	ctx := workflow.WithActivityOptions(l.ctx, opts)
	err := workflow.ExecuteActivity(ctx, ActivityCloseScaleSetSession, CloseScaleSetSessionInput{Session: l.sessionRef()}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(l.ctx).Warn("Abandoned scale-set session not closed; the service ends it", "pool", l.in.Pool, "error", err)
	}
	l.st.Session = nil
}

// isType reports whether err is an application error of that type.
func isType(err error, typ string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == typ
}

// handOver signals the message to the pool, with the jobs acquired after it, and waits until
// the server has it: only then may the service forget it. The acquired jobs go with the
// message that led to their acquisition because their own assigned messages can wait in the
// queue behind every offer sent before them (docs/testing.md): a burst's pool would otherwise
// scale on the statistics alone for as long as those offers take to read.
func (l *scaleSetListener) handOver(msg ScaleSetMessage, acquired []int64) error {
	sig := ScaleSetMessageSignal{ScaleSetID: l.in.ScaleSetID, SessionID: l.st.Session.SessionID, Message: msg}
	if len(acquired) > 0 && workflow.GetVersion(l.ctx, changeScaleSetHandOverAcquired, workflow.DefaultVersion, 1) >= 1 {
		sig.Acquired = acquired
	}
	return workflow.SignalExternalWorkflow(l.ctx, PoolWorkflowID(l.in.Pool), "", SignalScaleSetMessage, sig).Get(l.ctx, nil)
}

// acknowledge deletes the handed-over message at the service. If the session is lost first,
// the next session gets the message again and the pool counts it once.
func (l *scaleSetListener) acknowledge(id int64) {
	opts := ScaleSetSessionCallPolicy
	opts.TaskQueue = l.st.Session.TaskQueue
	ctx := workflow.WithActivityOptions(l.ctx, opts)
	err := workflow.ExecuteActivity(ctx, ActivityDeleteScaleSetMessage, DeleteScaleSetMessageInput{
		Session: l.sessionRef(), MessageID: id,
	}).Get(ctx, nil)
	l.st.LastMessageID = id
	switch {
	case sessionLost(err):
		l.st.Session = nil
	case err != nil:
		workflow.GetLogger(l.ctx).Warn("Scale-set message not acknowledged; a new session will get it again",
			"pool", l.in.Pool, "message", id, "error", err)
		l.abandonSession()
	}
}

// sessionLost: the service no longer has the session, or the worker holding it is gone.
func sessionLost(err error) bool {
	if isType(err, ErrSessionLost) {
		return true
	}
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout)
}

func (l *scaleSetListener) shouldContinueAsNew() bool {
	if l.in.ContinueAsNewAfter > 0 && l.polls >= l.in.ContinueAsNewAfter {
		return true
	}
	return workflow.GetInfo(l.ctx).GetContinueAsNewSuggested()
}
