package faults

import (
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// The phases of TestGitHubMisbehavesMidBurst, one after another.
const (
	// githubIncident: every REST call answered 502, as in a GitHub incident.
	githubIncident = 15 * time.Second
	// githubSlowAnswer: every REST call carried out at once and answered this late, beyond the
	// GitHub activities' 30-second StartToClose, for githubSlowFor.
	githubSlowAnswer = 35 * time.Second
	githubSlowFor    = 40 * time.Second
	// githubSecondaryFor: every call refused with 403 and Retry-After: 5 (a secondary limit).
	githubSecondaryFor = 15 * time.Second
	// githubBudget per githubBudgetWindow: the hour's budget shrunk so that it is spent within
	// seconds and every call waits for its reset; githubBudgetFor is how long it stays shrunk.
	githubBudget       = 5
	githubBudgetWindow = 20 * time.Second
	githubBudgetFor    = 30 * time.Second
)

// TestGitHubMisbehavesMidBurst puts GitHub through what it does on a bad day while a burst of 20
// jobs is under way: an incident (502 to every call), then answers slower than the activities'
// timeout (the registration is made at GitHub though its answer never reaches the worker, so
// the retry meets GitHub's 409 for the name and must adopt or clear it), then a secondary rate
// limit (403 with Retry-After), then an hour's budget spent until its reset. Every job runs
// once, one runner per job, none failed, no busy runner removed, nothing left behind.
func TestGitHubMisbehavesMidBurst(t *testing.T) {
	s := newSystem(t, "fa-gh-bad")
	s.apply(workFor(20*time.Second), nil)
	t.Cleanup(func() {
		world.GitHub.EndOutage()
		world.GitHub.SetSlowAnswers(0)
		world.GitHub.SetSecondaryRateLimit(0)
		world.GitHub.SetRateLimit(0, 0)
	})
	jobs := s.queueJobs(20)
	s.eventually("the burst under way (jobs running, others still waiting)", func() bool {
		return count(jobs, githubdouble.StatusInProgress)+count(jobs, githubdouble.StatusCompleted) >= 3
	})
	phase := func(what string, d time.Duration, start, end func()) {
		t.Logf("%s for %s: %d jobs queued, %d running, %d done", what, d,
			count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted))
		start()
		time.Sleep(d) // the fault itself
		end()
	}
	phase("502 to every call", githubIncident,
		func() { world.GitHub.StartOutage(githubdouble.Outage{}) }, world.GitHub.EndOutage)
	phase("answers 35 s late", githubSlowFor,
		func() { world.GitHub.SetSlowAnswers(githubSlowAnswer) }, func() { world.GitHub.SetSlowAnswers(0) })
	phase("a secondary rate limit", githubSecondaryFor,
		func() { world.GitHub.SetSecondaryRateLimit(5 * time.Second) }, func() { world.GitHub.SetSecondaryRateLimit(0) })
	phase("the budget spent until its reset", githubBudgetFor,
		func() { world.GitHub.SetRateLimit(githubBudget, githubBudgetWindow) }, func() { world.GitHub.SetRateLimit(0, 0) })
	s.checkAllClean(jobs)
}
