package pools

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// temporalCLI runs the real `temporal` CLI against the world's server, as docs/pools.md shows
// operators to, and returns its combined output and whether it succeeded.
func temporalCLI(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	args = append(args, "--address", world.Temporal.Address, "--namespace", world.Temporal.Namespace)
	out, err := exec.Command(world.Temporal.CLIPath, args...).CombinedOutput()
	return string(out), err == nil
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, ok := temporalCLI(t, args...)
	if !ok {
		t.Fatalf("temporal %s failed:\n%s", strings.Join(args, " "), out)
	}
	return out
}

// queryStatus is `temporal workflow query --name status -o json`, decoded.
func queryStatus(t *testing.T, pool string) workflows.PoolStatus {
	t.Helper()
	out := mustCLI(t, "workflow", "query", "--workflow-id", workflows.PoolWorkflowID(pool), "--name", workflows.QueryStatus, "-o", "json")
	var res struct {
		QueryResult []workflows.PoolStatus `json:"queryResult"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.QueryResult) != 1 {
		t.Fatalf("query output does not decode (%v):\n%s", err, out)
	}
	return res.QueryResult[0]
}

// listCount is `temporal workflow list --query ...`, counted.
func listCount(t *testing.T, query string) int {
	t.Helper()
	out := mustCLI(t, "workflow", "list", "--query", query, "-o", "json")
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list output does not decode (%v):\n%s", err, out)
	}
	return len(list)
}

// The operator commands of docs/pools.md, run with the real CLI against the real server:
// scale (and a rejected scale), pause, resume, drain, the status query and the list of busy
// runners of a pool.
func TestOperatorCommandsWithTheTemporalCLI(t *testing.T) {
	p := newPoolTest(t, "ops")
	// The pool continues as new every few iterations, so the commands also reach runs that
	// took over from earlier ones, with runner workflows reporting across the hand-over.
	firstRun := p.startContinuingAsNew(p.spec(1, 3, "20s"), 8)
	id := workflows.PoolWorkflowID(p.name)
	p.eventually(wait, "1 idle runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 1 })

	mustCLI(t, "workflow", "update", "execute", "--workflow-id", id, "--name", "scale", "--input", `{"min":2,"max":3}`)
	p.eventually(wait, "2 idle runners after scale", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 2 })

	out, ok := temporalCLI(t, "workflow", "update", "execute", "--workflow-id", id, "--name", "scale", "--input", `{"min":5}`)
	if ok || !strings.Contains(out, "min (5) must be <= max (3)") {
		t.Errorf("scale to min 5 above max 3: ok=%v, output:\n%s\nwant a rejection that says why", ok, out)
	}

	mustCLI(t, "workflow", "signal", "--workflow-id", id, "--name", "pause", "--input", `{"reason":"maintenance"}`)
	mustCLI(t, "workflow", "update", "execute", "--workflow-id", id, "--name", "scale", "--input", `{"min":3}`)
	st := queryStatus(t, p.name)
	if st.Mode != workflows.PoolPaused || st.ModeReason != "maintenance" || st.Desired != 3 || len(st.Runners) != 2 {
		t.Errorf("paused pool after scale: mode %s (%s), desired %d, %d runners; want paused, desired 3, still 2 runners",
			st.Mode, st.ModeReason, st.Desired, len(st.Runners))
	}
	mustCLI(t, "workflow", "signal", "--workflow-id", id, "--name", "resume")
	p.eventually(wait, "3 idle runners after resume", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 3 })

	jobs := p.queueJobs(1)
	p.eventually(wait, "a busy runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerBusy, "") == 1 })
	busyQuery := `RunnerPool="` + p.name + `" AND RunnerState="busy"`
	waitFor(t, wait, "the busy runner listed by its search attributes", func() bool { return listCount(t, busyQuery) == 1 })

	mustCLI(t, "workflow", "signal", "--workflow-id", id, "--name", "drain", "--input", `{"reason":"node upgrade"}`)
	// The idle runners go at once; the busy one only after its job. How long the busy runner is
	// alone depends on the machine's speed, so the proof is the job's outcome at GitHub: a runner
	// removed mid-job would have failed it.
	p.eventually(wait, "nothing left after the job", func(st workflows.PoolStatus) bool {
		return st.Mode == workflows.PoolDraining && len(st.Runners) == 0
	})
	if job, ok := world.GitHub.Job(jobs[0]); !ok || job.Status != githubdouble.StatusCompleted || job.Conclusion != githubdouble.ConclusionSuccess {
		t.Errorf("the job that was running when the pool drained: %+v (found %v), want completed with success", job, ok)
	}
	waitFor(t, wait, "no runner pods", func() bool { return len(p.pods()) == 0 })
	if st := queryStatus(t, p.name); st.Totals.Failed != 0 || st.Desired != 0 {
		t.Errorf("drained pool: %+v", st.Totals)
	}

	mustCLI(t, "workflow", "signal", "--workflow-id", id, "--name", "resume")
	p.eventually(wait, "3 idle runners after the second resume", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 3 })

	if desc, err := p.c.DescribeWorkflowExecution(p.ctx, id, ""); err != nil || desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == firstRun {
		t.Errorf("the pool never continued as new (%v)", err)
	}
	if testworld.RecordingHistories() {
		recordHistory(t, id, firstRun, "pool-operator-first-run")
		recordHistory(t, id, "", "pool-operator-latest-run")
	}
}

// A pool started on TaskQueue, as every pool was before the deciders had a queue of their own,
// moves to DecisionTaskQueue at its next continue-as-new and goes on serving its jobs there.
func TestPoolMovesToTheDecisionQueue(t *testing.T) {
	p := newPoolTest(t, "moves")
	firstRun := p.startOnQueue(workflows.TaskQueue, workflows.PoolInput{Spec: p.spec(1, 3, "20s"), ContinueAsNewAfter: 4})
	id := workflows.PoolWorkflowID(p.name)
	p.eventually(wait, "1 idle runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 1 })
	waitFor(t, wait, "the pool's next run on DecisionTaskQueue", func() bool {
		desc, err := p.c.DescribeWorkflowExecution(p.ctx, id, "")
		info := desc.GetWorkflowExecutionInfo()
		return err == nil && info.GetExecution().GetRunId() != firstRun && info.GetTaskQueue() == workflows.DecisionTaskQueue
	})
	if desc, err := p.c.DescribeWorkflowExecution(p.ctx, id, firstRun); err != nil || desc.GetWorkflowExecutionInfo().GetTaskQueue() != workflows.TaskQueue {
		t.Fatalf("the first run: %v, %v; want it on %s", desc.GetWorkflowExecutionInfo().GetTaskQueue(), err, workflows.TaskQueue)
	}
	jobs := p.queueJobs(2)
	p.checkRanOnceEach(p.jobsDone(jobs))
	if st := queryStatus(t, p.name); st.Totals.Failed != 0 {
		t.Errorf("totals %+v after the move, want no failed runner", st.Totals)
	}
	if testworld.RecordingHistories() {
		recordHistory(t, id, firstRun, "pool-decides-apart")
	}
}

// startContinuingAsNew starts the pool as `starter apply` does (update-with-start), with the
// test knob that makes it continue as new after canAfter loop iterations; it returns the
// first run's id.
func (p *poolTest) startContinuingAsNew(spec workflows.PoolSpec, canAfter int) string {
	p.t.Helper()
	return p.startWithInput(workflows.PoolInput{Spec: spec, ContinueAsNewAfter: canAfter})
}

// startWithInput starts the pool of in.Spec as `starter apply` does, with in's test knobs; it
// returns the first run's id.
func (p *poolTest) startWithInput(in workflows.PoolInput) string {
	p.t.Helper()
	return p.startOnQueue(workflows.DecisionTaskQueue, in)
}

// startOnQueue starts the pool as startWithInput does, on the given task queue (TaskQueue: as
// the releases before DecisionTaskQueue did).
func (p *poolTest) startOnQueue(queue string, in workflows.PoolInput) string {
	p.t.Helper()
	spec := in.Spec
	start := p.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: workflows.PoolWorkflowID(spec.Name), TaskQueue: queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.PoolWorkflowType, in)
	h, err := p.c.UpdateWithStartWorkflow(p.ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.UpdateApply,
			Args: []any{workflows.ApplyRequest{Spec: spec}}, WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	if err := h.Get(p.ctx, nil); err != nil {
		p.t.Fatal(err)
	}
	run, err := start.Get(p.ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	return run.GetRunID()
}

// recordHistory exports a run's history for the replay test in workflows/testdata.
func recordHistory(t *testing.T, workflowID, runID, name string) {
	t.Helper()
	path, err := world.Temporal.RecordHistory(workflowID, runID, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", path)
}
