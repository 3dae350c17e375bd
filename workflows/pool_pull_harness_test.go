package workflows

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pullSim plays GitHub for the PullJobs activity: one repository whose queued jobs the test
// sets, answered 304 while they have not changed since the ETag the pool sends.
type pullSim struct {
	mu     sync.Mutex
	queued []int64
	// unread: the answer's one run has a page the read did not hold (PulledRun.Unread).
	unread      bool
	version     int
	calls       int
	notModified int
}

func (s *pullSim) set(queued ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = queued
	s.version++
}

func (s *pullSim) pull(ctx context.Context, in PullJobsInput) (PullJobsResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	etag := fmt.Sprintf(`W/"v%d"`, s.version)
	if len(in.Last) == 1 && len(in.Last[0].Listings) == 1 && in.Last[0].Listings[0].ETag == etag {
		s.notModified++
		repo := in.Last[0]
		for i := range repo.Runs {
			if len(repo.Runs[i].Jobs) > 0 {
				return PullJobsResult{}, fmt.Errorf("the pool sent run %d's jobs; it sends ETags only", repo.Runs[i].RunID)
			}
			repo.Runs[i].NotModified = true
		}
		return PullJobsResult{Repos: []PulledRepo{repo}, Calls: 1, NotModified: 1}, nil
	}
	repo := PulledRepo{Repository: in.Repos[0], Listings: []PulledListing{{Status: JobQueued, ETag: etag}}}
	for _, id := range s.queued {
		repo.Listings[0].RunIDs = append(repo.Listings[0].RunIDs, id+1000)
		repo.Runs = append(repo.Runs, PulledRun{RunID: id + 1000, Jobs: []PulledJob{{ID: id, Status: JobQueued}}})
	}
	if s.unread {
		repo.Listings[0].RunIDs = append(repo.Listings[0].RunIDs, 999)
		repo.Runs = append(repo.Runs, PulledRun{RunID: 999, Unread: true})
	}
	return PullJobsResult{Repos: []PulledRepo{repo}, Calls: 1}, nil
}

// ownReads plays GitHub for a pool that reads its repositories itself: the pool runs as before
// change shared-pull (histories recorded then, and runs that began so).
func ownReads(h *poolHarness, sim *pullSim) {
	h.env.OnGetVersion(changeSharedPull, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	h.env.RegisterActivityWithOptions(sim.pull, activity.RegisterOptions{Name: ActivityPullJobs})
}

// pullScenario: a pool with no webhook at all starts runners for the jobs its pull reads
// queued, keeps them while they run (the answer moves on), and scales to zero after; quiet
// reads are 304s. Its reads and decisions come out the same across continue-as-new.
func pullScenario(sim *pullSim) poolScenario {
	return poolScenario{
		name: "pull only: scale up for queued jobs, to zero after",
		setup: func(h *poolHarness) (PoolSpec, time.Duration) {
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(3), ptr(false)
			spec.ScaleDownDelay = &metav1.Duration{Duration: time.Minute}
			spec.Pull = &PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app"}, Interval: &metav1.Duration{Duration: 30 * time.Second}}
			h.onSegment = func() { ownReads(h, sim) }
			var busy []string
			h.check(50*time.Second, "no runner without queued jobs", func(st PoolStatus) bool { return len(st.Runners) == 0 && st.Pull != nil })
			h.at(time.Minute, func() { sim.set(1, 2) })
			h.check(2*time.Minute, "a runner per queued job", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 2 })
			h.at(2*time.Minute+time.Second, func() { busy = h.startJobsWithIDs(1, 2) })
			h.at(2*time.Minute+2*time.Second, func() { sim.set() })
			h.check(3*time.Minute, "busy runners kept, no runner for jobs that have one", func(st PoolStatus) bool {
				return countState(st, RunnerBusy, "") == 2 && st.Desired == 2 && st.Pull.Queued == 0
			})
			h.at(4*time.Minute, func() { h.finishJobs(busy) })
			h.check(7*time.Minute, "back to zero after the scale-down delay", func(st PoolStatus) bool { return len(st.Runners) == 0 && st.Desired == 0 })
			// Between two reads, so the scenario's end never races one.
			return spec, 7*time.Minute + 45*time.Second
		},
		verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
			if end.Totals.Started != 2 {
				t.Errorf("started %d runners, want 2", end.Totals.Started)
			}
			if end.Pull == nil || end.Pull.Calls < 10 || end.Pull.NotModified < end.Pull.Calls-3 {
				t.Errorf("pull status %+v: want a read every 30 s, all but the changed ones answered 304", end.Pull)
			}
		},
	}
}

func TestPoolPullAcrossContinueAsNew(t *testing.T) {
	var baseline string
	for _, canAfter := range []int{0, 1, 2, 3, 5, 8} {
		sim := &pullSim{}
		sc := pullScenario(sim)
		h := newPoolHarness(t, canAfter)
		spec, end := sc.setup(h)
		st := h.run(spec, end)
		sc.verify(t, h, st)
		fp := fingerprint(st, h.stats) + fmt.Sprintf("pull calls=%d notModified=%d\n", st.Pull.Calls, st.Pull.NotModified)
		if canAfter == 0 {
			baseline = fp
			continue
		}
		if h.segments < 2 {
			t.Errorf("continue-as-new after %d: the pool never continued as new", canAfter)
		}
		if fp != baseline {
			t.Errorf("continue-as-new after %d ends differently:\n%s\nstraight through:\n%s", canAfter, fp, baseline)
		}
	}
}

// TestPullEndsReservationsOfJobsGitHubNoLongerLists: a reserved job the pull listed queued and
// then lists no more (it ran and its in_progress and completed webhooks were lost) ends its
// reservation at that read, not at its expiry.
func TestPullEndsReservationsOfJobsGitHubNoLongerLists(t *testing.T) {
	sim := &pullSim{}
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(3), ptr(false)
	spec.Pull = &PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app"}, Interval: &metav1.Duration{Duration: 30 * time.Second}}
	h.onSegment = func() { ownReads(h, sim) }
	h.at(time.Minute, func() {
		sim.set(7)
		h.update("queued", UpdateReservations, reserve(JobQueued, 7))
	})
	h.check(2*time.Minute, "one reservation, counted once with the pull's queued job", func(st PoolStatus) bool {
		return st.Reservations == 1 && st.Desired == 1 && st.Pull.Queued == 1
	})
	h.at(2*time.Minute+time.Second, func() { sim.set() })
	h.check(3*time.Minute, "the reservation ended at the next read", func(st PoolStatus) bool {
		return st.Reservations == 0 && st.Desired == 0
	})
	h.run(spec, 3*time.Minute+10*time.Second)
}

// A pull-only pool runs three runners for three queued jobs; the next answers list nothing
// queued, but a run has jobs on a page the read did not hold: the pool keeps its runners past
// the scale-down delay, and says why, until an answer holds every page.
func TestPullHoldsRunnersWhileARunHasUnreadPages(t *testing.T) {
	sim := &pullSim{}
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(3), ptr(false)
	spec.ScaleDownDelay = &metav1.Duration{Duration: time.Minute}
	spec.Pull = &PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app"}, Interval: &metav1.Duration{Duration: 30 * time.Second}}
	h.onSegment = func() { ownReads(h, sim) }
	h.at(30*time.Second, func() { sim.set(1, 2, 3) })
	h.check(2*time.Minute, "a runner per queued job", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 3 })
	h.at(2*time.Minute+time.Second, func() {
		sim.mu.Lock()
		sim.unread = true
		sim.mu.Unlock()
		sim.set()
	})
	h.check(5*time.Minute, "runners held while a run has an unread page", func(st PoolStatus) bool {
		return countState(st, RunnerIdle, "") == 3 && st.Desired == 3 && st.Pull.UnreadRuns == 1 && strings.Contains(st.Why, "not read")
	})
	h.at(5*time.Minute+time.Second, func() {
		sim.mu.Lock()
		sim.unread = false
		sim.mu.Unlock()
		sim.set()
	})
	h.check(8*time.Minute, "scaled down once every page is read", func(st PoolStatus) bool { return len(st.Runners) == 0 && st.Desired == 0 })
	h.run(spec, 8*time.Minute+10*time.Second)
}
