package faults

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The GitHub reads a runner's registration check and its pool's listing make.
const (
	getRunnerRoute   = "GET /orgs/{org}/actions/runners/{runner_id}"
	listRunnersRoute = "GET /orgs/{org}/actions/runners"
	deleteRoute      = "DELETE /orgs/{org}/actions/runners/{runner_id}"
)

// TestGitHubServerErrorsAtTheRegistrationCheck: GitHub answers 502 to every read of the
// organization's runners while three runners run their jobs, and nobody has told them they are
// online (their jobs' in_progress webhooks are held; the pool's listing fails), so their pool
// asks each to check its registration at its 20-second timeout. The check reads the pod
// (running) and GitHub (502, retried): nothing is torn down on a read that failed. When GitHub
// answers again, the check finds each runner busy; every job runs once, to success, on the
// runner that took it, and no runner is removed, failed or started again.
func TestGitHubServerErrorsAtTheRegistrationCheck(t *testing.T) {
	s := newSystem(t, "fa-github")
	s.apply(workFor(60*time.Second), func(spec *workflows.PoolSpec) {
		spec.RegistrationTimeout = &metav1.Duration{Duration: 20 * time.Second}
	})
	world.GitHub.StartOutage(githubdouble.Outage{Routes: []string{getRunnerRoute, listRunnersRoute}})
	ended := false
	t.Cleanup(func() {
		if !ended {
			world.GitHub.EndOutage()
		}
	})
	// The queued events reach the intake; every later event waits at GitHub.
	world.GitHub.HoldWebhooks()
	t.Cleanup(func() { world.GitHub.ReleaseWebhooks(githubdouble.ReleaseInOrder) })
	jobs := s.queueJobs(3)
	world.GitHub.ReleaseWebhooks(githubdouble.ReleaseInOrder)
	world.GitHub.HoldWebhooks()
	s.eventually("every job running on a runner nobody has told it is online", func() bool {
		return count(jobs, githubdouble.StatusInProgress) == len(jobs)
	})
	s.eventually("each runner's registration check answered 502 twice", func() bool {
		return world.GitHub.Calls()[githubdouble.CallKey{Route: getRunnerRoute, Status: http.StatusBadGateway}] >= 2*len(jobs)
	})
	if n := world.GitHub.CallCount(deleteRoute); n != 0 {
		t.Errorf("%d runner removals while GitHub could not be read, want none", n)
	}
	st := s.status()
	if len(st.Runners) != len(jobs) || st.Totals.Started != int64(len(jobs)) || len(st.Finished) != 0 {
		t.Errorf("during the outage the pool has %d runners (totals %+v, finished %+v), want its %d, none ended", len(st.Runners), st.Totals, st.Finished, len(jobs))
	}
	world.GitHub.EndOutage()
	ended = true
	s.eventually("every runner seen busy by its registration check", func() bool {
		st := s.status()
		busy := 0
		for _, r := range st.Runners {
			if r.State == workflows.RunnerBusy {
				busy++
			}
		}
		return busy == len(jobs)
	})
	world.GitHub.ReleaseWebhooks(githubdouble.ReleaseInOrder)
	s.checkAllClean(jobs)
	for _, c := range world.GitHub.CallLog() {
		if c.Route == deleteRoute && c.Status == http.StatusUnprocessableEntity {
			t.Errorf("a removal met a busy runner (422) at %v", c.At)
		}
	}
}
