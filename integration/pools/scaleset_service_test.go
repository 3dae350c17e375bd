package pools

import (
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The Actions service as the public record describes it, beyond github.com's happy path: jobs
// reassigned when no runner took them in time, and backlogs cut short.

// TestScaleSetReassignedJobRunsOnceOnOneRunner: while the pool is paused, the service takes a
// job back three times (completed canceled, then assigned again); the pool, resumed within the
// last assignment, runs it once, on one runner, and ends with nothing held.
func TestScaleSetReassignedJobRunsOnceOnOneRunner(t *testing.T) {
	const lapse = 10 * time.Second
	p := newPoolTest(t, "ss-reassign")
	p.scaleSetPool(2, "1s")
	if err := p.c.SignalWorkflow(p.ctx, workflows.PoolWorkflowID(p.name), "", workflows.SignalPause, workflows.OperatorRequest{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	world.GitHub.SetScaleSetReassignAfter(lapse)
	t.Cleanup(func() { world.GitHub.SetScaleSetReassignAfter(0) })
	id := p.queueJobs(1)[0]
	waitFor(t, 6*lapse, "the job taken back three times", func() bool {
		j, _ := world.GitHub.Job(id)
		return j.Reassigned == githubdouble.ScaleSetMaxReassignments
	})
	if err := p.c.SignalWorkflow(p.ctx, workflows.PoolWorkflowID(p.name), "", workflows.SignalResume, workflows.OperatorRequest{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	jobs := p.jobsDone([]int64{id})
	p.checkRanOnceEach(jobs)
	if jobs[0].Conclusion != githubdouble.ConclusionSuccess {
		t.Errorf("the job concluded %q, want success on its last assignment", jobs[0].Conclusion)
	}
	st := p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	if st.Totals.Started != 1 {
		t.Errorf("started %d runners for one job assigned four times, want 1", st.Totals.Started)
	}
}

// TestScaleSetBacklogCutShortLosesNothing: 200 jobs are queued while the set has no listener
// (its worker stopped), more than a message holds (50) and more than the service keeps (the
// backlog is cut at 100 job messages here). The next worker's listener gets what was kept, the
// statistics count every job: all 200 run, once each, and no runner is left afterwards.
func TestScaleSetBacklogCutShortLosesNothing(t *testing.T) {
	const jobs = 200
	p := newPoolTestWith(t, "ss-backlog", nil)
	set := p.scaleSetPool(jobs, "1s")
	p.stopWorker()
	world.GitHub.SetScaleSetBacklogLimit(jobs / 2)
	t.Cleanup(func() { world.GitHub.SetScaleSetBacklogLimit(0) })
	ids := p.queueJobs(jobs)
	waitFor(t, wait, "the backlog cut short", func() bool {
		for _, s := range world.GitHub.ScaleSets() {
			if s.ID == set.ID {
				return s.DroppedJobMessages > 0
			}
		}
		return false
	})
	world.GitHub.SetScaleSetBacklogLimit(0)
	p.startWorkerWith(nil)
	p.checkRanOnceEach(p.jobsDone(ids))
	st := p.eventually(wait, "back to zero, nothing held", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	t.Logf("%d jobs: %d runners started", jobs, st.Totals.Started)
	if st.Totals.Started < jobs || st.Totals.Started > jobs+jobs/50 {
		t.Errorf("started %d runners for %d jobs, want one per job (within 2%%)", st.Totals.Started, jobs)
	}
}
