package activities

import (
	"encoding/json"
	"testing"

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
