package pools

import (
	"fmt"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// Issue 24, case 1, in the real world: an organization with more than 100 runners is listed
// in two pages. The pool's one runner is the 101st, busy with a long job, when GitHub removes
// one of another fleet's ephemeral runners between the listing's two page reads: the pool's
// runner moves to page 1 after it was read and the listing does not have it. It finishes its
// job; before changeConfirmGone the listing's silence ended it, its Secret was deleted and the
// garbage collector took its pod mid-job. Since changeListingTellsInBatches the pool does not
// tell a busy ephemeral runner that a listing lacks it (its registration goes with its job),
// so it costs no REST call either; a runner that is told asks GitHub by its id first (the
// runner's own tests, changeConfirmGone).
func TestBusyRunnerSkippedByAPagedListingFinishesItsJob(t *testing.T) {
	p := newPoolTest(t, "shift")
	scope := workflows.Scope{Organization: p.org}
	t.Cleanup(func() { _ = p.c.TerminateWorkflow(p.ctx, workflows.ScopeListingWorkflowID(scope), "", "test over") })
	var fleet []string
	for i := range 100 {
		fleet = append(fleet, fmt.Sprintf("fleet-%03d", i))
	}
	if err := world.GitHub.RegisterRunners(githubdouble.OrgScope(p.org), []string{"self-hosted", "other"}, fleet...); err != nil {
		t.Fatal(err)
	}
	// The job outlasts a rest interval of the listing, so a listing comes while it runs.
	jobTime := workflows.PoolListingInterval + 50*time.Second
	p.apply(p.spec(1, 1, jobTime.String()))
	st := p.eventually(wait, "the pool's runner idle", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, "") == 1
	})
	runner := st.Runners[0].Name
	job := p.queueJobs(1)[0]
	p.eventually(wait, "the runner busy", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerBusy, "") == 1
	})
	const getByID = "GET /orgs/{org}/actions/runners/{runner_id}"
	asked := world.GitHub.CallCount(getByID)

	removed := world.GitHub.RemoveAfterListPage(githubdouble.OrgScope(p.org), 1, fleet[0])
	select {
	case <-removed:
	case <-time.After(workflows.PoolListingInterval + wait/2):
		t.Fatal("no listing of the organization read its first page")
	}
	waitFor(t, jobTime+wait, "the job completed", func() bool {
		j, _ := world.GitHub.Job(job)
		return j.Status == githubdouble.StatusCompleted
	})
	j, _ := world.GitHub.Job(job)
	if j.Conclusion != githubdouble.ConclusionSuccess || j.RunnerName != runner {
		t.Errorf("job ended %q on %q, want success on %s (its runner was ended mid-job)", j.Conclusion, j.RunnerName, runner)
	}
	if n := world.GitHub.CallCount(getByID) - asked; n != 0 {
		t.Errorf("the busy ephemeral runner the listing skipped cost %d GETs by id, want none (the pool does not tell it)", n)
	}
}
