package githubdouble

import (
	"slices"
	"testing"

	"github.com/actions/scaleset"
)

// TestScaleSetCapacityBoundsAssignments: the service assigns a set no more jobs than the
// capacity its listener reports with each poll; a job that finishes makes room for the next,
// and a larger capacity takes the rest. Statistics count only what was assigned.
func TestScaleSetCapacityBoundsAssignments(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "bounded", "ss-bounded")
	sc := openSession(t, c, set.ID, "listener")
	if m, err := sc.GetMessage(t.Context(), 0, 2); err != nil || m != nil {
		t.Fatalf("first poll = %+v, %v", m, err)
	}
	jobs, err := w.QueueMatrix(JobSpec{Repository: "acme/app", Labels: []string{"ss-bounded"}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	msg := nextMessageWithCapacity(t, sc, 0, 2)
	assigned, _, _ := jobIDs(msg)
	if !slices.Equal(assigned, []int64{jobs[0].ID, jobs[1].ID}) || msg.Statistics.TotalAssignedJobs != 2 {
		t.Fatalf("capacity 2: assigned %v, statistics %+v; want the two oldest jobs", assigned, msg.Statistics)
	}
	ack(t, sc, msg)

	runJob(t, w, c, set.ID, "bounded-1")
	msg = nextMessageWithCapacity(t, sc, msg.MessageID, 2)
	ack(t, sc, msg)
	assigned, started, completed := jobIDs(msg)
	if len(started) != 1 || len(completed) != 1 || !slices.Equal(assigned, []int64{jobs[2].ID}) {
		t.Errorf("after one job ran: assigned %v, started %v, completed %v; want job %d assigned in its place",
			assigned, started, completed, jobs[2].ID)
	}
	msg = nextMessageWithCapacity(t, sc, msg.MessageID, 10)
	if assigned, _, _ := jobIDs(msg); !slices.Equal(assigned, []int64{jobs[3].ID, jobs[4].ID}) || msg.Statistics.TotalAssignedJobs != 4 {
		t.Errorf("capacity 10: assigned %v, statistics %+v; want the last two, four assigned", assigned, msg.Statistics)
	}
	if got := w.ScaleSets()[0].MaxCapacity; got != 10 {
		t.Errorf("MaxCapacity = %d, want 10", got)
	}
}

// TestScaleSetCapacityBoundsAcquisitions: a set offered its jobs is offered every one, and
// acquires only as many as its capacity leaves room for.
func TestScaleSetCapacityBoundsAcquisitions(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetJobOffers: true})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "ghes-bounded", "ss-ghes-bounded")
	sc := openSession(t, c, set.ID, "listener")
	if m, err := sc.GetMessage(t.Context(), 0, 1); err != nil || m != nil {
		t.Fatalf("first poll = %+v, %v", m, err)
	}
	jobs, _ := w.QueueMatrix(JobSpec{Repository: "acme/app", Labels: []string{"ss-ghes-bounded"}}, 3)
	msg := nextMessageWithCapacity(t, sc, 0, 1)
	if len(msg.JobAvailableMessages) != 3 || msg.Statistics.TotalAvailableJobs != 3 {
		t.Fatalf("offers = %d (statistics %+v), want all 3 offered", len(msg.JobAvailableMessages), msg.Statistics)
	}
	ack(t, sc, msg)
	got, err := sc.AcquireJobs(t.Context(), []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID})
	if err != nil || !slices.Equal(got, []int64{jobs[0].ID}) {
		t.Errorf("AcquireJobs at capacity 1 = %v, %v; want [%d] alone", got, err, jobs[0].ID)
	}
	if st := w.ScaleSets()[0].Statistics; st.TotalAssignedJobs != 1 || st.TotalAvailableJobs != 2 {
		t.Errorf("statistics = %+v, want 1 assigned, 2 still available", st)
	}
}

// runJob starts a runner of the set and runs the first job the set's runners may take.
func runJob(t *testing.T, w *world, c *scaleset.Client, setID int, name string) {
	t.Helper()
	jit, err := c.GenerateJitRunnerConfig(t.Context(), &scaleset.RunnerScaleSetJitRunnerSetting{Name: name}, setID)
	if err != nil {
		t.Fatal(err)
	}
	rc := NewRunnerClient(w.URL())
	sess, err := rc.ConnectJIT(t.Context(), jit.EncodedJITConfig)
	if err != nil {
		t.Fatal(err)
	}
	j := acquireNow(t, w.Server, sess)
	if j == nil {
		t.Fatalf("runner %s found no job", name)
	}
	if err := rc.CompleteJob(t.Context(), sess, j.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
}
