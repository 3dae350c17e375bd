package faults

import (
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// apiServerPause is the outage issue 17 found stranding runners and starting extra ones: a
// 30-second pause converged, a 90-second one did not.
const apiServerPause = 90 * time.Second

// TestAPIServerPausedMidBurst hangs kube-apiserver (SIGSTOP; etcd keeps running) for 90 s while
// a burst of 20 jobs is under way: runners are registering, pods starting, jobs running and
// ending. Meanwhile every Kubernetes call of the worker hangs and is retried, the pod watcher
// loses its Lease, the simulator's kubelet keeps retrying its status writes and the garbage
// collector waits. Once the API server continues, everything converges: every job ran once,
// one runner per job, nothing left behind.
func TestAPIServerPausedMidBurst(t *testing.T) {
	s := newSystem(t, "fa-kube")
	s.apply(workFor(20*time.Second), nil)
	jobs := s.queueJobs(20)
	s.eventually("the burst under way (jobs running, others still waiting)", func() bool {
		return count(jobs, githubdouble.StatusInProgress)+count(jobs, githubdouble.StatusCompleted) >= 5
	})
	t.Logf("pausing kube-apiserver: %d jobs queued, %d running, %d done; pool: %s",
		count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted), s.describe())
	if err := world.Kube.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = world.Kube.ResumeAPIServer()
		}
	})
	time.Sleep(apiServerPause) // the outage itself
	if err := world.Kube.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("kube-apiserver continues: %d jobs queued, %d running, %d done",
		count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted))
	s.checkAllClean(jobs)
}
