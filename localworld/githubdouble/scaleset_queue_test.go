package githubdouble

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
)

func TestScaleSetHasOneSessionAtATime(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, log := w.scaleSetClient("acme")
	set := createSet(t, c, "single")
	first := openSession(t, c, set.ID, "listener-a")
	if first.Session().Statistics == nil || first.Session().MessageQueueURL == "" {
		t.Fatalf("session = %+v, want statistics and a message queue", first.Session())
	}
	_, err := c.MessageSessionClient(t.Context(), set.ID, "listener-b")
	if err == nil {
		t.Fatal("a second session was opened while the first is live")
	}
	if st, _ := log.last(); st != http.StatusConflict || !strings.Contains(err.Error(), "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException") {
		t.Errorf("second session answered %d (%v), want 409 RunnerScaleSetSessionConflictException", st, err)
	}
	if got := w.ScaleSets()[0].SessionOwner; got != "listener-a" {
		t.Errorf("session owner = %q, want listener-a", got)
	}
	if err := first.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	openSession(t, c, set.ID, "listener-b")
}

func TestScaleSetSessionNobodyPollsTimesOut(t *testing.T) {
	clock := newFakeClock()
	w := scaleSetWorld(t, Config{Now: clock.Now, ScaleSetSessionTimeout: time.Minute})
	c, log := w.scaleSetClient("acme")
	set := createSet(t, c, "crashy")
	stale := openSession(t, c, set.ID, "crashed")
	clock.Advance(time.Minute + time.Second)
	openSession(t, c, set.ID, "successor")
	// The stale listener's poll is refused; its refresh finds no session.
	if _, err := stale.GetMessage(t.Context(), 0, 1); err == nil {
		t.Fatal("the timed-out session's poll succeeded")
	}
	if st, _ := log.last(); st != http.StatusNotFound {
		t.Errorf("the stale refresh answered %d, want 404", st)
	}
	// Closing it is 400 with the expired-session exception, as the service answers ARC's
	// listener; the successor's session is untouched.
	err := stale.Close(t.Context())
	if st, _ := log.last(); st != http.StatusBadRequest || err == nil ||
		!strings.Contains(err.Error(), "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException") {
		t.Errorf("closing the timed-out session answered %d (%v), want 400 RunnerScaleSetSessionExpiredException", st, err)
	}
	if got := w.ScaleSets()[0].SessionOwner; got != "successor" {
		t.Errorf("session owner after the stale close = %q, want successor", got)
	}
}

// TestScaleSetSessionOfADeadHolderIsKeptItsTimeout: a session whose holder stopped polling
// refuses another (409) until Config.ScaleSetSessionTimeout has passed since its last poll,
// however long that poll lasted, and not a moment longer.
func TestScaleSetSessionOfADeadHolderIsKeptItsTimeout(t *testing.T) {
	clock := newFakeClock()
	w := scaleSetWorld(t, Config{Now: clock.Now, ScaleSetSessionTimeout: time.Minute, ScaleSetPollWait: 300 * time.Millisecond})
	c, log := w.scaleSetClient("acme")
	set := createSet(t, c, "kept", "ss-kept")
	dead := openSession(t, c, set.ID, "dead")
	polled := make(chan error, 1)
	go func() {
		_, err := dead.GetMessage(t.Context(), 0, 1)
		polled <- err
	}()
	clock.Advance(50 * time.Second) // while the holder's last poll is open
	if err := <-polled; err != nil {
		t.Fatalf("the holder's last poll: %v", err)
	}
	clock.Advance(time.Minute - time.Second) // 59 s since the poll ended, 109 s since it began
	if _, err := c.MessageSessionClient(t.Context(), set.ID, "successor"); err == nil {
		t.Fatal("a successor's session opened while the dead holder's is kept")
	}
	if st, _ := log.last(); st != http.StatusConflict {
		t.Errorf("the successor was answered %d, want 409", st)
	}
	if got := w.ScaleSets()[0].SessionOwner; got != "dead" {
		t.Errorf("session owner = %q, want the dead holder's, still kept", got)
	}
	clock.Advance(2 * time.Second)
	openSession(t, c, set.ID, "successor")
}

func TestScaleSetMessageQueueTokenIsRefreshedAfter401(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "refresh")
	sc := openSession(t, c, set.ID, "listener")
	before := sc.Session()
	w.ExpireMessageQueueTokens()
	if msg, err := sc.GetMessage(t.Context(), 0, 1); err != nil || msg != nil {
		t.Fatalf("GetMessage after expiry = %+v, %v; want nil, nil after a refresh", msg, err)
	}
	after := sc.Session()
	if after.SessionID != before.SessionID || after.MessageQueueAccessToken == before.MessageQueueAccessToken {
		t.Errorf("session after refresh: id %v → %v, token changed %v; want the same id, a new token",
			before.SessionID, after.SessionID, after.MessageQueueAccessToken != before.MessageQueueAccessToken)
	}
	svc := w.ActionsServiceCalls()
	if svc[CallKey{Route: "GET " + messagesRoute, Status: http.StatusUnauthorized}] != 1 ||
		svc[CallKey{Route: "PATCH " + scaleSetsRoute + "/{scale_set_id}/sessions/{session_id}", Status: http.StatusOK}] != 1 {
		t.Errorf("calls = %v, want one 401 poll and one refresh", svc)
	}
}

func TestScaleSetMessagesAreRedeliveredUntilDeleted(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "redeliver", "ss-linux")
	sc := openSession(t, c, set.ID, "listener")
	if msg, err := sc.GetMessage(t.Context(), 0, 5); err != nil || msg != nil {
		t.Fatalf("empty queue: %+v, %v; want 202 (nil, nil)", msg, err)
	}
	j, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "ss-linux"}})
	if err != nil {
		t.Fatal(err)
	}
	msg := nextMessage(t, sc, 0)
	if assigned, _, _ := jobIDs(msg); !slices.Equal(assigned, []int64{j.ID}) {
		t.Errorf("assigned = %v, want [%d]", assigned, j.ID)
	}
	if s := msg.Statistics; s == nil || s.TotalAssignedJobs != 1 || s.TotalAvailableJobs != 1 {
		t.Errorf("statistics = %+v, want one assigned, available job", s)
	}
	again := nextMessage(t, sc, 0)
	if again.MessageID != msg.MessageID || len(again.JobAssignedMessages) != 1 {
		t.Errorf("second poll = message %d, want %d again (not deleted)", again.MessageID, msg.MessageID)
	}
	if err := sc.DeleteMessage(t.Context(), msg.MessageID); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
	if err := sc.DeleteMessage(t.Context(), msg.MessageID); err == nil {
		t.Error("deleting the message twice succeeded, want 404")
	}
	if m, err := sc.GetMessage(t.Context(), msg.MessageID, 5); err != nil || m != nil {
		t.Errorf("after delete: %+v, %v; want nil, nil", m, err)
	}
	if got := w.ScaleSets()[0].MaxCapacity; got != 5 {
		t.Errorf("MaxCapacity = %d, want the 5 the listener sent", got)
	}
}

func TestScaleSetMessagesWaitForTheNextSession(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "durable", "ss-durable")
	first := openSession(t, c, set.ID, "a")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/lib", Labels: []string{"ss-durable"}})
	msg := nextMessage(t, first, 0)
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := openSession(t, c, set.ID, "b")
	if second.Session().Statistics.TotalAssignedJobs != 1 {
		t.Errorf("new session's statistics = %+v, want the assigned job", second.Session().Statistics)
	}
	again := nextMessage(t, second, 0)
	if assigned, _, _ := jobIDs(again); again.MessageID != msg.MessageID || !slices.Equal(assigned, []int64{j.ID}) {
		t.Errorf("new session got message %d %v, want the undeleted %d with job %d", again.MessageID, assigned, msg.MessageID, j.ID)
	}
}

// TestScaleSetRunnerLifecycle follows one job: assigned to the set, run by a runner made from
// the set's JIT configuration (decoded by the runner protocol the simulator speaks), never
// removed while busy, and gone after its job.
func TestScaleSetRunnerLifecycle(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	ctx := t.Context()
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "lifecycle", "ss-life")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "ss-life"}})
	ack(t, sc, nextMessage(t, sc, 0))

	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "life-1"}, set.ID)
	if err != nil {
		t.Fatalf("GenerateJitRunnerConfig: %v", err)
	}
	if _, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "life-1"}, set.ID); !errors.Is(err, scaleset.RunnerExistsError) {
		t.Errorf("a second JIT configuration of the name: %v, want RunnerExistsError", err)
	}
	byName, err := c.GetRunnerByName(ctx, "life-1")
	if err != nil || byName == nil || byName.ID != jit.Runner.ID || byName.RunnerScaleSetID != set.ID {
		t.Fatalf("GetRunnerByName = %+v, %v; want runner %d of set %d", byName, err, jit.Runner.ID, set.ID)
	}
	rc := NewRunnerClient(w.URL())
	sess, err := rc.ConnectJIT(ctx, jit.EncodedJITConfig)
	if err != nil {
		t.Fatalf("ConnectJIT: %v", err)
	}
	got, err := rc.AcquireJob(ctx, sess, time.Second)
	if err != nil || got == nil || got.ID != j.ID {
		t.Fatalf("AcquireJob = %+v, %v; want job %d", got, err, j.ID)
	}
	started := nextMessage(t, sc, 0)
	if len(started.JobStartedMessages) != 1 || started.JobStartedMessages[0].RunnerName != "life-1" ||
		started.Statistics.TotalBusyRunners != 1 || started.Statistics.TotalRunningJobs != 1 {
		t.Errorf("started message = %+v (stats %+v), want life-1 busy with the job", started.JobStartedMessages, started.Statistics)
	}
	ack(t, sc, started)

	if err := c.RemoveRunner(ctx, int64(jit.Runner.ID)); !errors.Is(err, scaleset.JobStillRunningError) {
		t.Fatalf("RemoveRunner of a busy runner: %v, want JobStillRunningError", err)
	}
	if err := rc.CompleteJob(ctx, sess, j.ID, ConclusionSuccess); err != nil {
		t.Fatalf("CompleteJob: %v", err)
	}
	done := nextMessage(t, sc, 0)
	if len(done.JobCompletedMessages) != 1 || done.JobCompletedMessages[0].Result != "succeeded" ||
		done.Statistics.TotalAssignedJobs != 0 || done.Statistics.TotalRegisteredRunners != 0 {
		t.Errorf("completed message = %+v (stats %+v), want succeeded and nothing left", done.JobCompletedMessages, done.Statistics)
	}
	if _, err := c.GetRunner(ctx, jit.Runner.ID); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("GetRunner after the job: %v, want RunnerNotFoundError (ephemeral)", err)
	}
	if err := c.RemoveRunner(ctx, int64(jit.Runner.ID)); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("RemoveRunner of a removed runner: %v, want RunnerNotFoundError", err)
	}
}

func TestScaleSetIdleRunnerIsRemoved(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "idle")
	jit, err := c.GenerateJitRunnerConfig(t.Context(), &scaleset.RunnerScaleSetJitRunnerSetting{Name: "idle-1"}, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveRunner(t.Context(), int64(jit.Runner.ID)); err != nil {
		t.Fatalf("RemoveRunner: %v", err)
	}
	if len(w.Runners()) != 0 {
		t.Errorf("runners = %+v, want none", w.Runners())
	}
}

// TestScaleSetJobsGoOnlyToTheSetsRunners: a job assigned to a set waits for the set's runner
// even when a REST runner with the same labels is idle, and a set's runner takes no other job.
func TestScaleSetJobsGoOnlyToTheSetsRunners(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	ctx := t.Context()
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "exclusive", "linux")
	setJob, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux"}})

	restCfg, err := w.jit(ctx, w.client(testToken, nil), "acme", "rest-1", "linux")
	if err != nil {
		t.Fatal(err)
	}
	rest := connectJIT(t, w.Server, restCfg)
	if got := acquireNow(t, w.Server, rest); got != nil {
		t.Fatalf("a REST runner took the set's job %d", got.ID)
	}
	// A job the set cannot take (another label) goes to REST runners, never to the set's.
	other, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux", "gpu"}})
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "set-1"}, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	setRunner, err := NewRunnerClient(w.URL()).ConnectJIT(ctx, jit.EncodedJITConfig)
	if err != nil {
		t.Fatal(err)
	}
	if got := acquireNow(t, w.Server, setRunner); got == nil || got.ID != setJob.ID {
		t.Fatalf("the set's runner got %+v, want job %d", got, setJob.ID)
	}
	if j, _ := w.Job(other.ID); j.Status != StatusQueued {
		t.Errorf("the gpu job is %s, want queued", j.Status)
	}
}

func TestScaleSetDeletedAtGitHub(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, log := w.scaleSetClient("acme")
	set := createSet(t, c, "doomed", "ss-doomed")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-doomed"}})
	if !w.DeleteScaleSet(int64(set.ID)) {
		t.Fatal("DeleteScaleSet found no set")
	}
	if _, err := sc.GetMessage(t.Context(), 0, 1); err == nil {
		t.Fatal("a poll of the deleted set's session succeeded")
	}
	if st, _ := log.last(); st != http.StatusNotFound {
		t.Errorf("the refresh answered %d, want 404", st)
	}
	// Recreated, the set is assigned the job that was waiting.
	again := createSet(t, c, "doomed", "ss-doomed")
	msg := nextMessage(t, openSession(t, c, again.ID, "listener"), 0)
	if assigned, _, _ := jobIDs(msg); !slices.Equal(assigned, []int64{j.ID}) {
		t.Errorf("recreated set's first message assigns %v, want [%d]", assigned, j.ID)
	}
}

func TestScaleSetCancelledQueuedJobCompletes(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "cancel", "ss-cancel")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-cancel"}})
	ack(t, sc, nextMessage(t, sc, 0))
	if err := w.CancelJob(j.ID); err != nil {
		t.Fatal(err)
	}
	msg := nextMessage(t, sc, 0)
	if _, _, completed := jobIDs(msg); !slices.Equal(completed, []int64{j.ID}) || msg.JobCompletedMessages[0].Result != "canceled" {
		t.Errorf("completed = %v, want [%d] canceled", completed, j.ID)
	}
}

// ack deletes a handled message.
func ack(t *testing.T, sc *scaleset.MessageSessionClient, msg *scaleset.RunnerScaleSetMessage) {
	t.Helper()
	if err := sc.DeleteMessage(context.WithoutCancel(t.Context()), msg.MessageID); err != nil {
		t.Fatalf("DeleteMessage(%d): %v", msg.MessageID, err)
	}
}

// TestScaleSetPollSkipsMessagesUpToLastMessageID: a poll naming the last message its listener
// handled is not given that message again, deleted or not, nor any before it; newer ones come.
func TestScaleSetPollSkipsMessagesUpToLastMessageID(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, log := w.scaleSetClient("acme")
	set := createSet(t, c, "cursor", "ss-cursor")
	sc := openSession(t, c, set.ID, "listener")
	first, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-cursor"}})
	msg := nextMessage(t, sc, 0)
	if m, err := sc.GetMessage(t.Context(), msg.MessageID, 5); err != nil || m != nil {
		t.Fatalf("poll past the undeleted message %d = %+v, %v; want nothing (202)", msg.MessageID, m, err)
	}
	second, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-cursor"}})
	next := nextMessage(t, sc, msg.MessageID)
	if assigned, _, _ := jobIDs(next); next.MessageID <= msg.MessageID || !slices.Equal(assigned, []int64{second.ID}) {
		t.Errorf("next message %d assigns %v, want a newer one assigning [%d] (not %d again)", next.MessageID, assigned, second.ID, first.ID)
	}
	if err := sc.DeleteMessage(t.Context(), msg.MessageID); err == nil {
		t.Error("deleting the skipped message succeeded, want 404 (the service dropped it)")
	} else if st, _ := log.last(); st != http.StatusNotFound {
		t.Errorf("deleting the skipped message answered %d, want 404", st)
	}
}

// TestScaleSetRemovalOfGoneRunners: with Config.ScaleSetRemovalOfGoneRunners, removing a set's
// runner again, once it is gone, succeeds as a delete that is idempotent; an id the service
// never gave out is still not found.
func TestScaleSetRemovalOfGoneRunners(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetRemovalOfGoneRunners: true})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "gone")
	jit, err := c.GenerateJitRunnerConfig(t.Context(), &scaleset.RunnerScaleSetJitRunnerSetting{Name: "gone-1"}, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.RemoveRunner(t.Context(), int64(jit.Runner.ID)); err != nil {
			t.Fatalf("RemoveRunner #%d: %v, want success", i+1, err)
		}
	}
	if _, err := c.GetRunner(t.Context(), jit.Runner.ID); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("GetRunner of the removed runner: %v, want RunnerNotFoundError", err)
	}
	if err := c.RemoveRunner(t.Context(), int64(jit.Runner.ID)+1000); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("RemoveRunner of an id never given out: %v, want RunnerNotFoundError", err)
	}
}
