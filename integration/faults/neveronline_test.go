package faults

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestRunnerNeverOnlineIsReplacedByItsPool: the first runner's pod runs but its runner never
// connects. At its registration timeout the runner finds itself registered at GitHub and
// offline, removes its registration and Secret (its pod goes with the Secret) and ends failed,
// saying it never came online; it registers no other runner itself. Its pool, whose job still
// waits, starts one more runner after its failure backoff, and that one runs the job.
func TestRunnerNeverOnlineIsReplacedByItsPool(t *testing.T) {
	s := newSystem(t, "fa-never")
	s.apply(workFor(2*time.Second), func(spec *workflows.PoolSpec) {
		spec.RegistrationTimeout = &metav1.Duration{Duration: 20 * time.Second}
	})
	first := workflows.RunnerName(s.pool, s.status().Generation, 1)
	world.Simulator.SetFault(first, simulator.FaultNeverOnline)
	t.Cleanup(func() { world.Simulator.SetFault(first, simulator.FaultNone) })
	jobs := s.queueJobs(1)
	s.checkClean(jobs, 2, 1)
	st := s.status()
	if len(st.Finished) != 2 || st.Finished[0].Name != first || st.Finished[0].State != workflows.RunnerFailed ||
		!strings.HasPrefix(st.Finished[0].Reason, workflows.NeverOnlineReason) {
		t.Errorf("recent ends %+v, want %s failed first, having never come online", st.Finished, first)
	}
	if j, _ := world.GitHub.Job(jobs[0]); j.RunnerName == first {
		t.Errorf("the job ran on %s, which never came online", first)
	}
}
