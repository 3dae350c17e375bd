package pools

import (
	"net/http"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// pullInterval is the tests' read interval: the shortest a spec may ask, so each test sees
// several reads in well under two minutes.
const pullInterval = workflows.MinPullInterval

// The routes the pull reads, as the double counts them.
const (
	routeRuns = "GET /repos/{owner}/{repo}/actions/runs"
	routeJobs = "GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs"
)

// pullBudget is the pull-only test's hourly budget.
const pullBudget = 300

func queuedPull(repos ...string) *workflows.PullSpec {
	return &workflows.PullSpec{Metric: workflows.PullMetricQueuedJobs, Repositories: repos,
		Interval: &metav1.Duration{Duration: pullInterval}}
}

// jobsDone waits until every job completed and returns them.
func (p *poolTest) jobsDone(ids []int64) []githubdouble.Job {
	p.t.Helper()
	var jobs []githubdouble.Job
	waitFor(p.t, 3*time.Minute, "every job completed", func() bool {
		jobs = jobs[:0]
		for _, id := range ids {
			j, ok := world.GitHub.Job(id)
			if !ok || j.Status != githubdouble.StatusCompleted {
				return false
			}
			jobs = append(jobs, j)
		}
		return true
	})
	return jobs
}

// checkRanOnceEach checks that every job succeeded on a runner of the pool, each on its own
// runner (ephemeral runners take one job each).
func (p *poolTest) checkRanOnceEach(jobs []githubdouble.Job) {
	p.t.Helper()
	seen := map[string]int64{}
	for _, j := range jobs {
		pool, ok := workflows.PoolFromRunnerName(j.RunnerName)
		if j.Conclusion != githubdouble.ConclusionSuccess || !ok || pool != p.name {
			p.t.Errorf("job %d: %s on runner %q, want success on a runner of %s", j.ID, j.Conclusion, j.RunnerName, p.name)
		}
		if other, dup := seen[j.RunnerName]; dup {
			p.t.Errorf("runner %s ran jobs %d and %d", j.RunnerName, other, j.ID)
		}
		seen[j.RunnerName] = j.ID
	}
}

// pullCalls counts the double's answers on the pull's routes in the call log from index from,
// and among them the 304s and the refusals.
func pullCalls(from int) (calls, notModified, refused int) {
	for _, c := range world.GitHub.CallLog()[from:] {
		if c.Route != routeRuns && c.Route != routeJobs {
			continue
		}
		calls++
		switch c.Status {
		case http.StatusNotModified:
			notModified++
		case http.StatusForbidden, http.StatusTooManyRequests:
			refused++
		}
	}
	return calls, notModified, refused
}

// TestPullOnlyPoolScalesUpAndToZero: a pool with no webhook at all (the double has no hook
// configured, so GitHub sends nothing) starts runners for the jobs GitHub lists queued, runs
// each once, and returns to zero; its reads are counted at the double, 304s included, the
// quiet ones cost no budget, and none is refused.
func TestPullOnlyPoolScalesUpAndToZero(t *testing.T) {
	p := newPoolTest(t, "pull-only")
	world.GitHub.SetWebhookURL("") // no hook: GitHub records and sends no delivery
	// A small hour's budget: the pull, the registrations and the runner listing must fit it
	// (runnerflow stops at its reserve, a fifth of it, so nothing is refused).
	world.GitHub.SetRateLimit(pullBudget, time.Hour)
	t.Cleanup(func() { world.GitHub.SetRateLimit(0, 0) })
	deliveries := len(world.GitHub.Deliveries())
	from := len(world.GitHub.CallLog())
	spec := p.spec(0, 5, "2s")
	spec.Pull = queuedPull("app")
	p.apply(spec.WithDefaults())

	ids := p.queueJobs(3)
	p.checkRanOnceEach(p.jobsDone(ids))
	var read workflows.RepoPullState
	st := p.eventually(2*time.Minute, "back to zero, then a quiet read answered 304", func(st workflows.PoolStatus) bool {
		read = p.sharedPull(p.org + "/app")
		return len(st.Runners) == 0 && st.Desired == 0 && st.Pull != nil && st.Pull.Queued == 0 && read.NotModified >= 2
	})
	if st.Totals.Started < 1 || st.Totals.Started > int64(len(ids)) {
		t.Errorf("pool started %d runners for %d jobs", st.Totals.Started, len(ids))
	}
	if n := len(world.GitHub.Deliveries()); n != deliveries {
		t.Errorf("%d webhook deliveries recorded; a pull-only pool's world sends none", n-deliveries)
	}
	calls, notModified, refused := pullCalls(from)
	t.Logf("pull: %d calls at the double (%d answered 304); the repository's shared read counted %d (%d 304)", calls, notModified, read.Calls, read.NotModified)
	if !st.Pull.Shared || st.Pull.Calls != 0 {
		t.Errorf("pool's pull %+v: want its reads shared, none of its own", st.Pull)
	}
	if read.Calls == 0 || read.Calls > int64(calls) || read.NotModified > int64(notModified) || len(read.Pools) != 1 {
		t.Errorf("the shared read counted %d calls (%d 304) for %d pools but the double answered %d (%d 304)", read.Calls, read.NotModified, len(read.Pools), calls, notModified)
	}
	if refused != 0 || read.LastError != "" || len(st.Pull.Stale) != 0 {
		t.Errorf("%d pull calls refused, last error %q, stale %v: the pull must stay within the budget", refused, read.LastError, st.Pull.Stale)
	}
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-pull")
		recordHistory(t, workflows.RepoPullWorkflowID(p.org+"/app"), "", "repo-pull")
	}
}

// sharedPull is the status of a repository's shared pull workflow (zero before it answers).
func (p *poolTest) sharedPull(repo string) workflows.RepoPullState {
	var st workflows.RepoPullState
	if v, err := p.c.QueryWorkflow(p.ctx, workflows.RepoPullWorkflowID(repo), "", workflows.QueryStatus); err == nil {
		_ = v.Get(&st)
	}
	return st
}

// TestBusyPercentagePoolScalesByFactors: a persistent pool of 2 runners, both busy (100% ≥
// 0.75), doubles to 4 at its next read; with 2 of 4 busy it keeps 4; once the jobs are over
// (0% ≤ 0.3) it halves back to 2. Webhooks tell the runners they are busy at once.
func TestBusyPercentagePoolScalesByFactors(t *testing.T) {
	p := newPoolTest(t, "pull-busy")
	p.webhooks()
	spec := p.spec(2, 8, "40s")
	persistent := false
	spec.Ephemeral = &persistent
	up, down, upF, downF := 0.75, 0.3, 2.0, 0.5
	spec.Pull = &workflows.PullSpec{Metric: workflows.PullMetricBusyPercentage, Interval: &metav1.Duration{Duration: pullInterval},
		ScaleUpThreshold: &up, ScaleDownThreshold: &down, ScaleUpFactor: &upF, ScaleDownFactor: &downF}
	p.apply(spec.WithDefaults())
	p.eventually(wait, "2 idle runners", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 2 })

	ids := p.queueJobs(2)
	st := p.eventually(2*time.Minute, "4 runners after a read with both busy", func(st workflows.PoolStatus) bool {
		return st.Pull.Target == 4 && st.Desired == 4 && count(st, workflows.RunnerIdle, "")+count(st, workflows.RunnerBusy, "") == 4
	})
	if st.Totals.Started != 4 {
		t.Errorf("started %d runners, want 4 (2, then × 2)", st.Totals.Started)
	}
	p.jobsDone(ids)
	st = p.eventually(2*time.Minute, "back to 2 after a read with none busy", func(st workflows.PoolStatus) bool {
		return st.Pull.Target == 2 && st.Desired == 2 && len(st.Runners) == 2
	})
	if st.Pull.Calls != 0 {
		t.Errorf("the busy metric made %d GitHub calls; it reads the pool's own runners", st.Pull.Calls)
	}
}

// TestWebhookAndPullServeEveryJobOnceWhenWebhooksDrop: with a fifth of the webhooks dropped
// (queued, in_progress and completed alike), a pool reading both serves every job, each on
// one runner, and returns to zero.
func TestWebhookAndPullServeEveryJobOnceWhenWebhooksDrop(t *testing.T) {
	p := newPoolTest(t, "pull-hooks")
	p.webhooks()
	world.GitHub.DropWebhooks(0.2)
	t.Cleanup(func() { world.GitHub.DropWebhooks(0) })
	deliveries := len(world.GitHub.Deliveries())
	spec := p.spec(0, 10, "5s")
	spec.Pull = queuedPull("app")
	// A reservation whose job's in_progress and completed webhooks were both lost, and which
	// queued and ran between two reads, holds a runner until it expires: the pull never saw it.
	spec.ReservationDuration = &metav1.Duration{Duration: time.Minute}
	p.apply(spec.WithDefaults())

	ids := p.queueJobs(20)
	jobs := p.jobsDone(ids)
	p.checkRanOnceEach(jobs)
	st := p.eventually(3*time.Minute, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0
	})
	dropped := 0
	for _, d := range world.GitHub.Deliveries()[deliveries:] {
		if d.Error != "" && d.StatusCode == 0 && slices.Contains(ids, d.JobID) {
			dropped++
		}
	}
	t.Logf("%d of the jobs' deliveries dropped; %d runners started for %d jobs; pull: %d calls, %d answered 304",
		dropped, st.Totals.Started, len(ids), st.Pull.Calls, st.Pull.NotModified)
	if dropped == 0 {
		t.Error("no delivery was dropped")
	}
}
