package workflows

import (
	"slices"
	"testing"
	"time"
)

// PrewarmedJobs lists build once GitHub queued it after the pool began warming for it, with the
// run that predicted it; a job warmed for that will be skipped, and a job never warmed for, are
// not listed.
func TestPrewarmedJobs(t *testing.T) {
	m, s := time.Minute, time.Second
	due := planAt(prewarmRunning(t), 4*m+40*s)
	if got := PrewarmedJobs(due.State); len(got) != 0 {
		t.Fatalf("build warmed, not queued: %+v, want nothing listed", got)
	}
	queued := ObservePrewarm(due.State, []WorkflowJobEvent{
		completedEvent(1, "lint", 0, 2*m, "success"),
		completedEvent(2, "test", 10*s, 5*m, "success"),
		prewarmEvent(JobQueued, 3, "Build image", 5*m+1*s),
	}, afterStart(5*m+1*s))
	want := []PrewarmedJob{{JobID: 3, Job: "build", Repository: prewarmRepo, RunID: prewarmRunID,
		WarmedAt: afterStart(4*m + 40*s), Queued: afterStart(5*m + 1*s)}}
	if got := PrewarmedJobs(planAt(queued, 5*m+2*s).State); !slices.Equal(got, want) {
		t.Errorf("build queued: %+v, want %+v", got, want)
	}
	failed := ObservePrewarm(due.State, []WorkflowJobEvent{completedEvent(2, "test", 10*s, 4*m+50*s, "failure")}, afterStart(4*m+50*s))
	if got := PrewarmedJobs(planAt(failed, 4*m+51*s).State); len(got) != 0 {
		t.Errorf("test failed, build given up on: %+v, want nothing listed", got)
	}
}
