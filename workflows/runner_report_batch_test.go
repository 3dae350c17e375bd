package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
)

// A runner hands its reports to the worker's group commit and signals the pool nothing itself;
// before changeReportsBatched it signalled the pool; a runner whose report the group commit
// could not deliver signals the pool itself.
func TestRunnerReportsThroughTheGroupCommit(t *testing.T) {
	refused := temporal.NewNonRetryableApplicationError("signal refused", "Refused", nil)
	for _, tc := range []struct {
		name       string
		before     bool
		batchFails bool
		viaPool    bool
	}{
		{name: "in batches"},
		{name: "before the change", before: true, viaPool: true},
		{name: "batch not delivered", batchFails: true, viaPool: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRunnerHarness(t)
			poolSignals := 0
			h.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID(runnerTestPool), "", SignalRunnerState, mock.Anything).Return(
				func(_, _, _, _ string, arg any) error {
					h.mu.Lock()
					defer h.mu.Unlock()
					poolSignals++
					h.reports = append(h.reports, arg.(RunnerStateReport))
					return nil
				}).Maybe()
			if tc.before {
				h.before(changeReportsBatched)
			}
			if tc.batchFails {
				h.env.OnActivity(ActivityReportRunnerState, mock.Anything, mock.Anything).Return(refused)
			}
			h.registered(7, "uid-1")
			h.deletes(1)
			h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
			h.at(2*time.Second, SignalRunnerStatus, onlineSig)
			h.at(3*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
			if res := h.mustRun(runnerTestInput(true)); res.FinalState != RunnerDone {
				t.Fatalf("final state = %s, want done", res.FinalState)
			}
			states := h.reportedStates()
			if len(states) < 2 || states[0] != RunnerIdle || states[len(states)-1] != RunnerDone {
				t.Errorf("reported %v, want idle first and done last", states)
			}
			if got := poolSignals == len(states); got != tc.viaPool || (!tc.viaPool && poolSignals != 0) {
				t.Errorf("%d of %d reports signalled to the pool, want all: %v", poolSignals, len(states), tc.viaPool)
			}
		})
	}
}

// A batch is the reports it carries, taken in order: a runner that went busy and then idle
// within one batch is idle, and another runner's report in between is taken too.
func TestPoolTakesABatchOfReportsInOrder(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas = 2
	h.check(2*time.Minute, "2 idle runners", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 2 })
	h.at(2*time.Minute+time.Second, func() {
		h.mu.Lock()
		a, b := h.inputs[0], h.inputs[1]
		h.sim[a.Name].state = RunnerIdle
		h.sim[b.Name].state, h.sim[b.Name].busy, h.sim[b.Name].job = RunnerBusy, true, 6
		h.mu.Unlock()
		h.signal(SignalRunnerStates, RunnerStateBatch{Reports: []RunnerStateReport{
			{Runner: a.Name, State: RunnerBusy, TemplateHash: a.Spec.TemplateHash, JobID: 5},
			{Runner: b.Name, State: RunnerBusy, TemplateHash: b.Spec.TemplateHash, JobID: 6},
			{Runner: a.Name, State: RunnerIdle, TemplateHash: a.Spec.TemplateHash},
		}})
	})
	h.check(3*time.Minute, "the first runner idle after its job, the second busy", func(st PoolStatus) bool {
		state := map[string]RunnerState{}
		for _, r := range st.Runners {
			state[r.Name] = r.State
		}
		return state[h.inputs[0].Name] == RunnerIdle && state[h.inputs[1].Name] == RunnerBusy
	})
	h.run(spec, 4*time.Minute)
}
