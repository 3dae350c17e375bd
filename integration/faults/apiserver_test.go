package faults

import (
	"os"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// apiServerPause is the outage issue 17 found stranding runners and starting extra ones: a
// 30-second pause converged, a 90-second one did not. RUNNERFLOW_FAULT_PAUSE sets a longer one
// (`make fault-long`: 10 minutes), kept out of `make test` for its length.
func apiServerPause(t *testing.T) time.Duration {
	v := os.Getenv("RUNNERFLOW_FAULT_PAUSE")
	if v == "" {
		return 90 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("RUNNERFLOW_FAULT_PAUSE=%q: want a positive duration such as 10m", v)
	}
	return d
}

// TestAPIServerPausedMidBurst hangs kube-apiserver (SIGSTOP; etcd keeps running) for 90 s (or
// RUNNERFLOW_FAULT_PAUSE) while
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
	pause := apiServerPause(t)
	t.Logf("the pause lasts %s", pause)
	time.Sleep(pause) // the outage itself
	if err := world.Kube.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("kube-apiserver continues: %d jobs queued, %d running, %d done",
		count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted))
	s.checkAllClean(jobs)
}
