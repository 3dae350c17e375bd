package faults

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// workerOutage is how long no worker runs; the pool's reservationDuration is half of it.
const (
	workerOutage        = time.Minute
	outageReservation   = 30 * time.Second
	unreachablePoolJobs = 10
)

// TestPoolUnreachableWhileItsEventsWait: no worker runs the pool (the worker fleet is down)
// while ten jobs are queued. The intake, a deployment of its own, keeps acknowledging GitHub's
// deliveries: each is a signal the Temporal server records in the pool's scale window (and a
// window hands its batch to its pool by signal, recorded in the pool's history), so an
// acknowledged event waits in a history, not in a process. When a worker runs again, every
// event reaches the pool and every job gets one runner, though the events are older than the
// pool's reservationDuration by then.
//
// The case is a pool unreachable for 15 minutes with the default 10-minute duration.
// What the outage's length changes is only how old the events are against reservationDuration
// when the pool applies them: nothing else in the window or the pool counts wall time while no
// worker runs (their timers fire when it returns, whatever they were set for), and the real
// Temporal server has no time skipping. So the outage here is one minute against a 30-second
// duration, the same case at a fraction of the cost; TestPoolCountsReservationsFromTheirEventsOwnTimes
// (workflows) applies a 15-minute-old event under the default duration.
func TestPoolUnreachableWhileItsEventsWait(t *testing.T) {
	s := newSystem(t, "fa-pool")
	s.apply(workFor(2*time.Second), func(spec *workflows.PoolSpec) {
		spec.ReservationDuration = &metav1.Duration{Duration: outageReservation}
	})
	s.stopWorker()
	jobs := s.queueJobs(unreachablePoolJobs)
	s.eventually("every queued event acknowledged while no worker runs", func() bool {
		acked := 0
		for _, d := range world.GitHub.Deliveries() {
			if d.Action == "queued" && d.Done && d.StatusCode >= 200 && d.StatusCode <= 299 && containsJob(jobs, d.JobID) {
				acked++
			}
		}
		return acked == len(jobs)
	})
	time.Sleep(workerOutage) // the outage itself: the events age past reservationDuration
	if n := count(jobs, githubdouble.StatusQueued); n != len(jobs) {
		t.Fatalf("%d of %d jobs still queued while no worker ran", n, len(jobs))
	}
	s.startWorker()
	s.checkAllClean(jobs)
}

func containsJob(jobs []int64, id int64) bool {
	for _, j := range jobs {
		if j == id {
			return true
		}
	}
	return false
}
