package githubdouble

import (
	"testing"
)

// TestScaleSetMessageHoldsAtMost50JobMessages: a backlog is delivered 50 job messages to a
// message, oldest first, and nothing is lost while no limit is set.
func TestScaleSetMessageHoldsAtMost50JobMessages(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "batches", "ss-batches")
	jobs, _ := w.QueueMatrix(JobSpec{Repository: "acme/app", Labels: []string{"ss-batches"}}, 120)
	sc := openSession(t, c, set.ID, "listener")
	var sizes []int
	var seen []int64
	last := 0
	for len(seen) < len(jobs) {
		msg := nextMessageWithCapacity(t, sc, last, 500)
		assigned, _, _ := jobIDs(msg)
		sizes, seen, last = append(sizes, len(assigned)), append(seen, assigned...), msg.MessageID
		ack(t, sc, msg)
	}
	if len(sizes) != 3 || sizes[0] != ScaleSetMessageBatch || sizes[1] != ScaleSetMessageBatch || sizes[2] != 20 {
		t.Errorf("messages held %v job messages, want 50, 50, 20", sizes)
	}
	for i, j := range jobs {
		if seen[i] != j.ID {
			t.Fatalf("job message %d names job %d, want %d (oldest first)", i, seen[i], j.ID)
		}
	}
}

// TestScaleSetBacklogIsTruncated: past Config.ScaleSetBacklogLimit the service drops job
// messages, while the statistics still count every job; once the listener has handled what was
// kept, new job messages come again.
func TestScaleSetBacklogIsTruncated(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetBacklogLimit: ScaleSetMessageBatch})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "truncated", "ss-truncated")
	jobs, _ := w.QueueMatrix(JobSpec{Repository: "acme/app", Labels: []string{"ss-truncated"}}, 120)
	sc := openSession(t, c, set.ID, "listener")
	if st := sc.Session().Statistics; st.TotalAssignedJobs != 120 {
		t.Errorf("session statistics = %+v, want all 120 jobs assigned", st)
	}
	msg := nextMessageWithCapacity(t, sc, 0, 500)
	if assigned, _, _ := jobIDs(msg); len(assigned) != 50 || assigned[0] != jobs[0].ID || msg.Statistics.TotalAssignedJobs != 120 {
		t.Fatalf("first message: %d assigned from %d, statistics %+v; want the 50 oldest, 120 counted", len(assigned), assigned[0], msg.Statistics)
	}
	ack(t, sc, msg)
	if m, err := sc.GetMessage(t.Context(), msg.MessageID, 500); err != nil || m != nil {
		t.Errorf("poll after the kept backlog = %+v, %v; want nothing: the rest was dropped", m, err)
	}
	if got := w.ScaleSets()[0]; got.DroppedJobMessages != 70 || got.Statistics.TotalAssignedJobs != 120 {
		t.Errorf("set = %d dropped, statistics %+v; want 70 dropped, 120 assigned", got.DroppedJobMessages, got.Statistics)
	}
	next, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-truncated"}})
	msg = nextMessageWithCapacity(t, sc, msg.MessageID, 500)
	if assigned, _, _ := jobIDs(msg); len(assigned) != 1 || assigned[0] != next.ID || msg.Statistics.TotalAssignedJobs != 121 {
		t.Errorf("after the backlog: assigned %v, statistics %+v; want job %d, 121 counted", assigned, msg.Statistics, next.ID)
	}
}
