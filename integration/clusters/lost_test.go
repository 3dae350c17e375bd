package clusters

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

// Issue 24, case 2: jobs are queued and a pool on a, b places its runners on a; they register,
// and a's API server stops for good before any connects. Once a has not answered for
// ClusterLostAfter the runners leave it (their registrations removed at GitHub), the pool
// places new runners on b, and every job runs there. When a comes back, nothing of the pool
// is left in it. Before, the runners on a asked again for ever and the jobs waited.
func TestJobsLeaveAClusterLostForGood(t *testing.T) {
	ct := newClusterTest(t, "org-cl-lost")
	ct.startWorker("both", clusterA(), clusterB())
	const pool = "cl-lost"
	spec := ct.spec(pool, 0, "a", "b")
	// a stops well before the runners' registration check, which would otherwise find their
	// pods running and them offline (never online) and end them while a still answers.
	spec.RegistrationTimeout.Duration = 45 * time.Second
	ct.apply(spec)
	// Runners on a register but never connect (a's simulator keeps them offline), so they are
	// still registering when a stops; b's simulator has no such fault.
	gen := ct.status(pool).Generation
	for seq := range int64(40) {
		world.Simulator.SetFault(workflows.RunnerName(pool, gen, seq), simulator.FaultNeverOnline)
	}
	var jobs []int64
	for range 3 {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: ct.org + "/app", Labels: []string{"self-hosted", pool}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j.ID)
	}
	ct.scale(pool, 3)
	ct.eventually("3 runners registering on a, their pods there", func() bool {
		st := ct.status(pool)
		return runnersOn(st, "a", "") == 3 && strings.Count(ct.objectsOf(pool, "a"), "pod/") == 3
	}, func() string { return describe(ct.status(pool)) })
	var stranded []string
	for _, r := range ct.status(pool).Runners {
		stranded = append(stranded, r.Name)
	}

	if err := world.Kube.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := world.Kube.ResumeAPIServer(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)

	lostWait := workflows.ClusterLostAfter + 6*time.Minute
	var ran []string
	ct.eventuallyWithin(lostWait, "every job completed", func() bool {
		ran = ran[:0]
		for _, id := range jobs {
			j, _ := world.GitHub.Job(id)
			if j.Status != githubdouble.StatusCompleted {
				return false
			}
			ran = append(ran, j.RunnerName)
		}
		return true
	}, func() string { return describe(ct.status(pool)) })
	for _, r := range ran {
		if slices.Contains(stranded, r) || !strings.HasPrefix(r, pool+"-") {
			t.Errorf("a job ran on %s, want a runner of %s on b", r, pool)
		}
	}
	if st := ct.status(pool); runnersOn(st, "a", "") != 0 {
		t.Errorf("runners still on a: %s", describe(st))
	}
	for _, r := range registrations(pool) {
		if slices.Contains(stranded, r) {
			t.Errorf("the stranded runner %s is still registered at GitHub", r)
		}
	}

	resume()
	ct.eventuallyWithin(wait+time.Minute, "nothing of "+pool+" left in a", func() bool { return ct.objectsOf(pool, "a") == "" },
		func() string { return "left: " + ct.objectsOf(pool, "a") })
	ct.checkNothingLeft(pool)
	t.Logf("stranded on a: %s; jobs ran on %s", strings.Join(stranded, " "), fmt.Sprint(ran))
}
