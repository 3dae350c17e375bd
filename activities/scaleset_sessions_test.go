package activities

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestScaleSetSessionActivities: a session is opened once (a second is a conflict), polled
// with messages redelivered until acknowledged, and closed; its worker's queue is named.
func TestScaleSetSessionActivities(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("listen", "listen")
	open := workflows.OpenScaleSetSessionInput{Scope: acme, ScaleSetID: set.ScaleSetID, Owner: "pool/listen"}
	sess, err := e.ssa.OpenScaleSetSession(e.ctx, open)
	if err != nil || sess.SessionID == "" || sess.TaskQueue != workflows.ScaleSetListenerTaskQueue("w1") {
		t.Fatalf("OpenScaleSetSession = %+v, %v", sess, err)
	}
	if _, err := e.ssa.OpenScaleSetSession(e.ctx, open); errType(err) != workflows.ErrSessionConflict {
		t.Fatalf("a second session: %v, want SessionConflict", err)
	}
	ref := workflows.ScaleSetSessionRef{ScaleSetID: set.ScaleSetID, SessionID: sess.SessionID}
	poll := workflows.PollScaleSetInput{Session: ref, MaxCapacity: 4}
	if out, err := e.ssa.PollScaleSet(e.ctx, poll); err != nil || out.Message != nil {
		t.Fatalf("empty poll = %+v, %v", out, err)
	}
	job, _ := e.gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "listen"}})
	first := e.pollMessage(poll)
	if len(first.Jobs) != 1 || first.Jobs[0].Event != workflows.ScaleSetJobAssigned || first.Jobs[0].RunnerRequestID != job.ID ||
		first.Jobs[0].Repository != "acme/app" || first.Statistics.AssignedJobs != 1 {
		t.Errorf("message = %+v, want job %d assigned", first, job.ID)
	}
	raw, _ := json.Marshal(first)
	e.mustNotLeak("a polled message", string(raw))
	if again := e.pollMessage(poll); again.ID != first.ID {
		t.Errorf("unacknowledged message %d came back as %d", first.ID, again.ID)
	}
	del := workflows.DeleteScaleSetMessageInput{Session: ref, MessageID: first.ID}
	for range 2 { // the second acknowledgement finds it gone: done already
		if err := e.ssa.DeleteScaleSetMessage(e.ctx, del); err != nil {
			t.Fatalf("DeleteScaleSetMessage: %v", err)
		}
	}
	if got := e.gh.ScaleSets()[0].MaxCapacity; got != 4 {
		t.Errorf("capacity reported = %d, want 4", got)
	}
	if err := e.ssa.CloseScaleSetSession(e.ctx, workflows.CloseScaleSetSessionInput{Session: ref}); err != nil {
		t.Fatalf("CloseScaleSetSession: %v", err)
	}
	if _, err := e.ssa.PollScaleSet(e.ctx, poll); errType(err) != workflows.ErrSessionLost {
		t.Errorf("polling a closed session: %v, want SessionLost", err)
	}
	if err := e.ssa.CloseScaleSetSession(e.ctx, workflows.CloseScaleSetSessionInput{Session: ref}); err != nil {
		t.Errorf("closing it again: %v, want nothing to do", err)
	}
}

// TestScaleSetSessionGoneAtTheServiceIsLost: a set deleted at GitHub takes its session; the
// poll's refresh finds none, and the listener is told to open another.
func TestScaleSetSessionGoneAtTheServiceIsLost(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("gone", "gone")
	sess, err := e.ssa.OpenScaleSetSession(e.ctx, workflows.OpenScaleSetSessionInput{Scope: acme, ScaleSetID: set.ScaleSetID, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	e.gh.DeleteScaleSet(set.ScaleSetID)
	poll := workflows.PollScaleSetInput{Session: workflows.ScaleSetSessionRef{ScaleSetID: set.ScaleSetID, SessionID: sess.SessionID}}
	if _, err := e.ssa.PollScaleSet(e.ctx, poll); errType(err) != workflows.ErrSessionLost && errType(err) != workflows.ErrScaleSetGone {
		t.Errorf("poll after the set went: %v (%s), want SessionLost or ScaleSetGone", err, errType(err))
	}
}

// pollMessage polls until a message comes.
func (e *scaleSetEnv) pollMessage(in workflows.PollScaleSetInput) *workflows.ScaleSetMessage {
	e.t.Helper()
	for range 100 {
		out, err := e.ssa.PollScaleSet(e.ctx, in)
		if err != nil {
			e.t.Fatalf("PollScaleSet: %v", err)
		}
		if out.Message != nil {
			return out.Message
		}
	}
	e.t.Fatal("no message came")
	return nil
}

// TestScaleSetOffersAreAcquiredOnce: on a service that offers jobs (GHES), a poll hands the
// offer over as an available job, acquiring it makes it the set's (assigned), and acquiring
// it again, as a second listener or a retry would, acquires nothing more.
func TestScaleSetOffersAreAcquiredOnce(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{ScaleSetJobOffers: true})
	ref, poll := e.openSession("offers")
	job, _ := e.gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "offers"}})
	offer := e.pollMessage(poll)
	if len(offer.Jobs) != 1 || offer.Jobs[0].Event != workflows.ScaleSetJobAvailable || offer.Jobs[0].RunnerRequestID != job.ID {
		t.Fatalf("message = %+v, want job %d offered", offer, job.ID)
	}
	if err := e.ssa.DeleteScaleSetMessage(e.ctx, workflows.DeleteScaleSetMessageInput{Session: ref, MessageID: offer.ID}); err != nil {
		t.Fatal(err)
	}
	acquire := workflows.AcquireScaleSetJobsInput{Session: ref, RunnerRequestIDs: []int64{job.ID}}
	if out, err := e.ssa.AcquireScaleSetJobs(e.ctx, acquire); err != nil || len(out.Acquired) != 1 || out.Acquired[0] != job.ID {
		t.Fatalf("AcquireScaleSetJobs = %+v, %v; want job %d acquired", out, err, job.ID)
	}
	if out, err := e.ssa.AcquireScaleSetJobs(e.ctx, acquire); err != nil || len(out.Acquired) != 0 {
		t.Errorf("acquiring again = %+v, %v; want nothing more acquired", out, err)
	}
	assigned := e.pollMessage(poll)
	if len(assigned.Jobs) != 1 || assigned.Jobs[0].Event != workflows.ScaleSetJobAssigned || assigned.Statistics.AssignedJobs != 1 {
		t.Errorf("message after acquiring = %+v, want the job assigned", assigned)
	}
}

// TestStoppingWorkerClosesItsSessions: a worker that begins to stop ends its polled session at
// once, ends every other one it holds at its listener's next call there (answered
// SessionLost), and opens none meanwhile; it knows when every listener has been told, so it
// closes its listener queue only then, and the worker that takes over opens the sets'
// sessions at once instead of meeting a conflict until the service times them out.
func TestStoppingWorkerClosesItsSessions(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{ScaleSetPollWait: time.Minute})
	polled, idle := e.ensure("polled", "polled"), e.ensure("idle", "idle")
	open := func(a *ScaleSetActivities, set int64) (workflows.OpenScaleSetSessionOutput, error) {
		return a.OpenScaleSetSession(e.ctx, workflows.OpenScaleSetSessionInput{Scope: acme, ScaleSetID: set, Owner: "pool/x"})
	}
	sess, err := open(e.ssa, polled.ScaleSetID)
	if err != nil {
		t.Fatal(err)
	}
	idleSess, err := open(e.ssa, idle.ScaleSetID)
	if err != nil {
		t.Fatal(err)
	}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(e.ssa.PollScaleSet, activity.RegisterOptions{Name: workflows.ActivityPollScaleSet})
	time.AfterFunc(200*time.Millisecond, e.ssa.Sessions.Leave)
	ref := workflows.ScaleSetSessionRef{ScaleSetID: polled.ScaleSetID, SessionID: sess.SessionID}
	_, err = env.ExecuteActivity(workflows.ActivityPollScaleSet, workflows.PollScaleSetInput{Session: ref, MaxCapacity: 1})
	if errType(err) != workflows.ErrSessionLost {
		t.Fatalf("a poll as its worker begins to stop: %v, want SessionLost for the listener to open anew", err)
	}
	if _, err := open(e.ssa, e.ensure("late", "late").ScaleSetID); errType(err) != workflows.ErrTransient {
		t.Errorf("opening on a stopping worker: %v, want a retry elsewhere (Transient)", err)
	}
	soon, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	if e.ssa.Sessions.ListenersTold(soon) {
		t.Errorf("every listener told while the idle session's listener has not called")
	}
	idleRef := workflows.ScaleSetSessionRef{ScaleSetID: idle.ScaleSetID, SessionID: idleSess.SessionID}
	ack := workflows.DeleteScaleSetMessageInput{Session: idleRef, MessageID: 1}
	if err := e.ssa.DeleteScaleSetMessage(e.ctx, ack); errType(err) != workflows.ErrSessionLost {
		t.Errorf("the idle session's next call on a stopping worker: %v, want SessionLost", err)
	}
	if !e.ssa.Sessions.ListenersTold(e.ctx) {
		t.Errorf("listeners not told after each session's call answered SessionLost")
	}
	if n := e.ssa.Sessions.CloseAll(e.ctx); n != 0 {
		t.Errorf("CloseAll closed %d sessions, want none left: each was closed as its listener was told", n)
	}

	next := &ScaleSetActivities{Clients: e.ssa.Clients, Kube: e.kube, Sessions: NewScaleSetSessions(), ListenerQueue: workflows.ScaleSetListenerTaskQueue("w2")}
	for _, set := range []int64{polled.ScaleSetID, idle.ScaleSetID} {
		if _, err := open(next, set); err != nil {
			t.Errorf("the next worker opening set %d: %v, want its session at once", set, err)
		}
	}
}

// TestScaleSetPollGetsPastAMessageOfAnUnknownType: a queue message of a type the client cannot
// read is deleted by the poll, which answers no message, instead of failing every poll of
// every session; the job messages behind it come next.
func TestScaleSetPollGetsPastAMessageOfAnUnknownType(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{ScaleSetUnknownMessages: githubdouble.UnknownQueueMessages})
	_, poll := e.openSession("odd")
	job, _ := e.gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "odd"}})
	var got *workflows.ScaleSetMessage
	for range 3 {
		out, err := e.ssa.PollScaleSet(e.ctx, poll)
		if err != nil {
			t.Fatalf("a poll meeting an unknown message: %v, want it skipped", err)
		}
		if out.Message != nil {
			got = out.Message
			break
		}
	}
	if got == nil || len(got.Jobs) != 1 || got.Jobs[0].RunnerRequestID != job.ID {
		t.Errorf("message after the unknown one = %+v, want job %d assigned", got, job.ID)
	}
}

// openSession creates a set of that name (and label) and opens its session: its reference and
// a poll of it reporting a capacity of 4.
func (e *scaleSetEnv) openSession(name string) (workflows.ScaleSetSessionRef, workflows.PollScaleSetInput) {
	e.t.Helper()
	set := e.ensure(name, name)
	sess, err := e.ssa.OpenScaleSetSession(e.ctx, workflows.OpenScaleSetSessionInput{Scope: acme, ScaleSetID: set.ScaleSetID, Owner: "pool/" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	ref := workflows.ScaleSetSessionRef{ScaleSetID: set.ScaleSetID, SessionID: sess.SessionID}
	return ref, workflows.PollScaleSetInput{Session: ref, MaxCapacity: 4}
}
