package faults

import (
	"context"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// temporalDown is how long the Temporal server stays down in its restart: a deploy's restart
// of a server, long enough for every kind of call to fail at least once.
const temporalDown = 20 * time.Second

// TestTemporalServerRestartedMidBurst restarts the Temporal server (on its persistent database
// file, down for temporalDown) while a burst of 20 jobs is under way: runners are registering, pods running, jobs
// ending. Meanwhile the worker's polls and the activities' reports fail and are retried, the
// pod watcher's signals and the intake's signals fail (GitHub's deliveries of in_progress and
// completed events in that time are answered 503 and lost, as GitHub does not send them
// again). Once the server answers again, the histories carry on where they stood: every job
// ran once, one runner per job, nothing left behind. The jobs' queued events are all taken
// before the restart; a queued event lost in an outage is the reconcile schedule's (its
// webhook redelivery).
func TestTemporalServerRestartedMidBurst(t *testing.T) {
	s := newSystem(t, "fa-temporal")
	s.deliveriesMayFail = true
	s.apply(workFor(20*time.Second), nil)
	jobs := s.queueJobs(20)
	s.eventually("every queued event acknowledged and the burst under way", func() bool {
		acked := 0
		for _, d := range world.GitHub.Deliveries() {
			if d.Action == "queued" && d.Done && d.StatusCode >= 200 && d.StatusCode <= 299 && containsJob(jobs, d.JobID) {
				acked++
			}
		}
		return acked == len(jobs) && count(jobs, githubdouble.StatusInProgress)+count(jobs, githubdouble.StatusCompleted) >= 5
	})
	t.Logf("restarting the Temporal server: %d jobs queued, %d running, %d done; pool: %s",
		count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted), s.describe())
	began := time.Now()
	if err := world.Temporal.Restart(context.Background(), temporalDown); err != nil {
		t.Fatal(err)
	}
	t.Logf("the Temporal server answers again after %s: %d jobs queued, %d running, %d done",
		time.Since(began).Round(100*time.Millisecond), count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted))
	s.checkAllClean(jobs)
}
