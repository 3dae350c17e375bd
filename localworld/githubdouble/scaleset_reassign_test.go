package githubdouble

import (
	"slices"
	"testing"
	"time"

	"github.com/actions/scaleset"
)

// reassignWorld is a world whose sets lose an assignment no runner takes within a minute of
// its clock; its sessions outlast the test's leaps of the clock.
func reassignWorld(t *testing.T, clock *fakeClock) (*world, *scaleset.Client) {
	t.Helper()
	w := scaleSetWorld(t, Config{Now: clock.Now, ScaleSetReassignAfter: time.Minute, ScaleSetSessionTimeout: time.Hour})
	c, _ := w.scaleSetClient("acme")
	return w, c
}

// events lists a message's job messages as "Type:id", completed ones with their result.
func events(msg *scaleset.RunnerScaleSetMessage) []string {
	var out []string
	for _, m := range msg.JobCompletedMessages {
		out = append(out, "JobCompleted:"+itoa(m.RunnerRequestID)+":"+m.Result)
	}
	for _, m := range msg.JobAssignedMessages {
		out = append(out, "JobAssigned:"+itoa(m.RunnerRequestID))
	}
	for _, m := range msg.JobStartedMessages {
		out = append(out, "JobStarted:"+itoa(m.RunnerRequestID))
	}
	return out
}

// TestScaleSetJobIsNotReassignedByDefault: with no reassignment timing a job waits for the
// set's runners however long it takes, as runnerflow's pools expect today.
func TestScaleSetJobIsNotReassignedByDefault(t *testing.T) {
	clock := newFakeClock()
	w := scaleSetWorld(t, Config{Now: clock.Now, ScaleSetSessionTimeout: time.Hour})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "patient", "ss-patient")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-patient"}})
	msg := nextMessage(t, sc, 0)
	ack(t, sc, msg)
	clock.Advance(30 * time.Minute)
	if m, err := sc.GetMessage(t.Context(), msg.MessageID, 10); err != nil || m != nil {
		t.Errorf("half an hour later: %+v, %v; want nothing", m, err)
	}
	if got, _ := w.Job(j.ID); got.Status != StatusQueued || got.Reassigned != 0 {
		t.Errorf("job = %s, reassigned %d; want queued, never reassigned", got.Status, got.Reassigned)
	}
}

// TestScaleSetJobNoRunnerTakesIsReassignedThenCancelled: an assignment no runner takes lapses;
// the listener hears the job cancelled and assigned again, same request id, three times, and
// then cancelled for good. The statistics count it assigned throughout.
func TestScaleSetJobNoRunnerTakesIsReassignedThenCancelled(t *testing.T) {
	clock := newFakeClock()
	w, c := reassignWorld(t, clock)
	set := createSet(t, c, "lapsing", "ss-lapsing")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-lapsing"}})
	msg := nextMessage(t, sc, 0)
	ack(t, sc, msg)
	id := itoa(j.ID)
	for n := 1; n <= ScaleSetMaxReassignments; n++ {
		clock.Advance(time.Minute)
		msg = nextMessage(t, sc, msg.MessageID)
		ack(t, sc, msg)
		if got := events(msg); !slices.Equal(got, []string{"JobCompleted:" + id + ":canceled", "JobAssigned:" + id}) ||
			msg.Statistics.TotalAssignedJobs != 1 {
			t.Fatalf("lapse %d: %v, statistics %+v; want cancelled and assigned again, still assigned", n, got, msg.Statistics)
		}
	}
	clock.Advance(time.Minute)
	msg = nextMessage(t, sc, msg.MessageID)
	if got := events(msg); !slices.Equal(got, []string{"JobCompleted:" + id + ":canceled"}) || msg.Statistics.TotalAssignedJobs != 0 {
		t.Errorf("last lapse: %v, statistics %+v; want the job cancelled for good", got, msg.Statistics)
	}
	if got, _ := w.Job(j.ID); got.Status != StatusCompleted || got.Conclusion != ConclusionCancelled || got.Reassigned != 3 {
		t.Errorf("job = %s/%s reassigned %d, want completed/cancelled after 3", got.Status, got.Conclusion, got.Reassigned)
	}
}

// TestScaleSetReassignedJobRunsOnce: a runner that comes after two lapses takes the job on its
// third assignment, and nothing lapses after.
func TestScaleSetReassignedJobRunsOnce(t *testing.T) {
	clock := newFakeClock()
	w, c := reassignWorld(t, clock)
	set := createSet(t, c, "late", "ss-late")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-late"}})
	clock.Advance(2*time.Minute + 30*time.Second) // two lapses while nobody looked
	msg := nextMessage(t, sc, 0)
	ack(t, sc, msg)
	id := itoa(j.ID)
	want := []string{"JobCompleted:" + id + ":canceled", "JobCompleted:" + id + ":canceled", "JobAssigned:" + id, "JobAssigned:" + id, "JobAssigned:" + id}
	if got := events(msg); !slices.Equal(got, want) {
		t.Fatalf("after two lapses: %v, want %v", got, want)
	}
	runJob(t, w, c, set.ID, "late-1")
	clock.Advance(time.Hour)
	got, _ := w.Job(j.ID)
	if got.Status != StatusCompleted || got.Conclusion != ConclusionSuccess || got.Reassigned != 2 || got.RunnerName != "late-1" {
		t.Errorf("job = %+v, want run once by late-1 after 2 reassignments", got)
	}
}

// TestScaleSetReassignmentWakesALongPoll: on the real clock, a lapse reaches a listener in the
// middle of its long poll, not at the poll's end.
func TestScaleSetReassignmentWakesALongPoll(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetReassignAfter: 300 * time.Millisecond, ScaleSetPollWait: 20 * time.Second})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "timed", "ss-timed")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-timed"}})
	msg := nextMessage(t, sc, 0)
	ack(t, sc, msg)
	began := time.Now()
	msg = nextMessage(t, sc, msg.MessageID)
	if got := events(msg); len(got) != 2 || got[0] != "JobCompleted:"+itoa(j.ID)+":canceled" || time.Since(began) > 10*time.Second {
		t.Errorf("poll answered %v after %s, want the lapse well before the poll's end", got, time.Since(began))
	}
}

// TestScaleSetOfferedJobIsOfferedAgainAfterALapse: in a set offered its jobs, a lapsed
// assignment puts the job back on offer; the listener acquires it again.
func TestScaleSetOfferedJobIsOfferedAgainAfterALapse(t *testing.T) {
	clock := newFakeClock()
	w := scaleSetWorld(t, Config{Now: clock.Now, ScaleSetJobOffers: true, ScaleSetReassignAfter: time.Minute, ScaleSetSessionTimeout: time.Hour})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "ghes-lapsing", "ss-ghes-lapsing")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-ghes-lapsing"}})
	msg := nextMessage(t, sc, 0)
	ack(t, sc, msg)
	if got, err := sc.AcquireJobs(t.Context(), []int64{j.ID}); err != nil || len(got) != 1 {
		t.Fatalf("AcquireJobs = %v, %v", got, err)
	}
	clock.Advance(time.Minute)
	msg = nextMessage(t, sc, msg.MessageID)
	if got := events(msg); !slices.Equal(got, []string{"JobCompleted:" + itoa(j.ID) + ":canceled", "JobAssigned:" + itoa(j.ID)}) ||
		len(msg.JobAvailableMessages) != 1 || msg.Statistics.TotalAvailableJobs != 1 || msg.Statistics.TotalAssignedJobs != 0 {
		t.Errorf("after the lapse: %v, %d available, statistics %+v; want assigned, cancelled, offered again",
			got, len(msg.JobAvailableMessages), msg.Statistics)
	}
	if got, err := sc.AcquireJobs(t.Context(), []int64{j.ID}); err != nil || len(got) != 1 {
		t.Errorf("acquiring it again = %v, %v; want it acquired", got, err)
	}
}
