package pools

import (
	"os"
	"os/exec"
	"path/filepath"
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
// statistics count every job: all 200 run, once each, and no runner or job is left held
// afterwards.
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
	// The jobs the ledger never heard of are known only by the statistics, which lag the
	// runners' ends by a message: a few runners more than jobs, never a runaway.
	t.Logf("%d jobs: %d runners started", jobs, st.Totals.Started)
	if st.Totals.Started > 2*jobs {
		t.Errorf("started %d runners for %d jobs, want at most twice as many", st.Totals.Started, jobs)
	}
}

// TestScaleSetListenerServesAgainAfterItsWorkerIsKilled: the worker holding the set's session
// is killed (SIGKILL: nothing closed). The listener notices the worker gone (the poll's
// heartbeat, then schedule-to-start timeout), and the next worker opens the set's session as
// soon as the service lets the dead one go, a retry later at most: the jobs queued meanwhile
// run once each. The service's lifetime for such a session is shortened here (the double's
// SetScaleSetSessionTimeout) so the test takes a minute, not three.
func TestScaleSetListenerServesAgainAfterItsWorkerIsKilled(t *testing.T) {
	const sessionLifetime = 20 * time.Second
	p := newPoolTest(t, "ss-killed")
	p.scaleSetPool(5, "1s")
	p.stopWorker() // the session moves to the worker process, to be killed there
	world.GitHub.SetScaleSetSessionTimeout(sessionLifetime)
	t.Cleanup(func() { world.GitHub.SetScaleSetSessionTimeout(0) })
	killed := startWorkerProcess(t, p.ns)
	ids := p.queueJobs(2)
	p.checkRanOnceEach(p.jobsDone(ids))
	before := p.status().ScaleSet.SessionID

	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	at := time.Now()
	p.startWorkerWith(nil)
	ids = p.queueJobs(2)
	st := p.eventually(5*time.Minute, "a new session", func(st workflows.PoolStatus) bool {
		return st.ScaleSet.SessionID != "" && st.ScaleSet.SessionID != before
	})
	serving := time.Since(at)
	p.checkRanOnceEach(p.jobsDone(ids))
	// Noticing the worker gone, then the service's lifetime and one retry of the open at most.
	noticed := workflows.ScaleSetPollPolicy.HeartbeatTimeout + workflows.ScaleSetPollPolicy.ScheduleToStartTimeout
	bound := max(noticed, sessionLifetime) + workflows.ScaleSetSessionConflictRetry
	t.Logf("serving again %s after the kill (bound %s); session %s → %s", serving.Round(time.Second), bound, before, st.ScaleSet.SessionID)
	if serving > bound {
		t.Errorf("the set was served again %s after its worker was killed, want within %s", serving.Round(time.Second), bound)
	}
}

// startWorkerProcess builds and starts the worker binary for the namespace, as an operator
// runs it; the test ends it (SIGKILL) if it still runs.
func startWorkerProcess(t *testing.T, namespace string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, "../../worker").CombinedOutput(); err != nil {
		t.Fatalf("go build ./worker: %v\n%s", err, out)
	}
	cmd := exec.Command(bin,
		"--temporal-address", world.Temporal.Address, "--namespace", world.Temporal.Namespace,
		"--kubeconfig", world.Kube.KubeconfigPath, "--watch-namespace", namespace,
		"--github-url", world.GitHub.URL(), "--metrics-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+world.GitHubToken)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// TestScaleSetSurvivesMessageIDsPerSession: the double assumes message ids rise across a set's
// sessions; should the service number each session's from 1, the pool's cursor (ahead of the
// new session's ids) sets the new messages aside, and the set's statistics carry its demand:
// every job still runs once, on one runner each, and nothing is held afterwards.
func TestScaleSetSurvivesMessageIDsPerSession(t *testing.T) {
	p := newPoolTest(t, "ss-ids")
	p.scaleSetPool(5, "1s")
	p.checkRanOnceEach(p.jobsDone(p.queueJobs(3)))
	cursor := p.status().ScaleSet.Ledger.LastMessageID
	p.stopWorker()
	world.GitHub.SetScaleSetMessageIDsPerSession(true)
	t.Cleanup(func() { world.GitHub.SetScaleSetMessageIDsPerSession(false) })
	p.startWorkerWith(nil)
	ids := p.queueJobs(4)
	p.checkRanOnceEach(p.jobsDone(ids))
	st := p.eventually(wait, "back to zero, nothing held", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	t.Logf("cursor %d before the new session, %d after; %d runners started for 7 jobs", cursor, st.ScaleSet.Ledger.LastMessageID, st.Totals.Started)
	if st.Totals.Started < 7 || st.Totals.Started > 8 {
		t.Errorf("started %d runners for 7 jobs, want one per job", st.Totals.Started)
	}
}

// TestScaleSetCapacityChangeCrossesContinueAsNew: a maximum the pool sends while its listener
// polls reaches the service, though the listener continues as new after every poll (the pool
// hands its listeners that test knob); the run that received the signal ends with it read.
func TestScaleSetCapacityChangeCrossesContinueAsNew(t *testing.T) {
	p := newPoolTest(t, "ss-capacity-can")
	world.GitHub.SetWebhookURL("")
	spec := p.spec(0, 2, "1s")
	spec.ScaleSet = &workflows.ScaleSetSpec{}
	spec = spec.WithDefaults()
	p.startWithInput(workflows.PoolInput{Spec: spec, ListenerContinueAsNewAfter: 1})
	set := p.listenedTo()
	reported := func(want int) func() bool {
		return func() bool {
			for _, s := range world.GitHub.ScaleSets() {
				if s.ID == set.ID {
					return s.MaxCapacity == want
				}
			}
			return false
		}
	}
	waitFor(t, wait, "the first maximum reported", reported(2))
	listener := workflows.ScaleSetListenerWorkflowID(p.name, set.ID)
	desc, err := p.c.DescribeWorkflowExecution(p.ctx, listener, "")
	if err != nil {
		t.Fatal(err)
	}
	before := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()

	maxR := 5
	spec.MaxReplicas = &maxR
	p.apply(spec)
	p.eventually(wait, "the listener told the new maximum", func(st workflows.PoolStatus) bool {
		return st.ScaleSet != nil && st.ScaleSet.ListenerMax == maxR
	})
	// The listener is in a poll (the service holds it up to 50 s); a job ends it with a
	// message, and the listener continues as new with the signal it received meanwhile.
	ids := p.queueJobs(1)
	waitFor(t, wait, "the new maximum reported to the service", reported(maxR))
	p.checkRanOnceEach(p.jobsDone(ids))
	desc, err = p.c.DescribeWorkflowExecution(p.ctx, listener, "")
	if err != nil {
		t.Fatal(err)
	}
	if desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == before {
		t.Errorf("the listener never continued as new")
	}
}
