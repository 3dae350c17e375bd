package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/workflows"
)

// What a bounded sticky cache costs: the runner workflows idle longest are the first the cache
// lets go, and the next thing one is told (a drain, a pod's end) finds it evicted, so the worker
// fetches its whole history and replays it before acting. After the last memory step the
// benchmark pauses the pools (so no replacement starts) and drains, one runner at a time:
//
//   - wakeSample of the runners started first (idle longest), by the drain signal the pool and
//     the pod watcher's signals take the same path as;
//   - as many more of them by the drain update an operator uses;
//   - wakeSample of the runners started last (idle shortest, the likeliest to be cached), by
//     signal.
//
// For each group it reports how long the runners took to act (signal: from the signal's event
// to the end of the workflow task that took it, by the server's clock; update: until the update
// returned), the SDK's sticky-cache misses and hits, the runner tasks' replay time, the
// workflow tasks that failed, and the worker's CPU for the group's drains from the signal to
// the runners' end. The worker's counters and CPU are net of what it does in as long with
// nothing asked of it (the other idle runners' pod checks, measured for wakeQuiet first).

const (
	wakeSample = 20
	// wakeQuiet is how long the idle worker's own CPU use is measured, to subtract it.
	wakeQuiet = 10 * time.Second
	// wakeDrainTimeout bounds one group's drains and their runners' end.
	wakeDrainTimeout = 5 * time.Minute
)

// workerWork is what the worker did over some time: its CPU and the SDK's counters.
type workerWork struct {
	cpuSec float64
	// misses and hits are the runner workflows' sticky-cache misses and hits.
	misses, hits float64
	// tasks counts the runner workflow tasks; replaySec is the time they spent replaying
	// history before reaching new events (the SDK's replay latency: near 0 for a cached one).
	tasks, replaySec float64
}

// readWork reads the worker's CPU and counters now.
func (w *workerProcess) readWork(ctx context.Context) (workerWork, error) {
	m, err := w.metrics(ctx)
	if err != nil {
		return workerWork{}, err
	}
	cpu, err := w.cpuSeconds()
	const replay = "temporal_workflow_task_replay_latency_seconds"
	return workerWork{
		cpuSec: cpu, misses: m["temporal_sticky_cache_miss_total|"+workflows.RunnerWorkflowType],
		hits:  m["temporal_sticky_cache_hit_total|"+workflows.RunnerWorkflowType],
		tasks: m[replay+"_count|"+workflows.RunnerWorkflowType], replaySec: m[replay+"_sum|"+workflows.RunnerWorkflowType],
	}, err
}

// since is the work done from before to w, less idle's rate for the seconds in between.
func (w workerWork) since(before workerWork, idle workerWork, seconds float64) workerWork {
	return workerWork{
		cpuSec: w.cpuSec - before.cpuSec - idle.cpuSec*seconds,
		misses: w.misses - before.misses - idle.misses*seconds, hits: w.hits - before.hits - idle.hits*seconds,
		tasks: w.tasks - before.tasks - idle.tasks*seconds, replaySec: w.replaySec - before.replaySec - idle.replaySec*seconds,
	}
}

// wakeGroup is one sample's figures.
type wakeGroup struct {
	name  string
	acted Percentiles
	// net is the worker's work for the group, less the idle worker's in as long.
	net workerWork
	// failedTasks counts WorkflowTaskFailed events in the drained runners' histories.
	failedTasks int
	seconds     float64
	idle        workerWork
}

func (g wakeGroup) String() string {
	n := float64(max(g.acted.N, 1))
	return fmt.Sprintf("%s: acted after %s; per drained runner, net of the idle worker: %.1f sticky-cache misses, %.1f hits, %.1f runner workflow tasks, %.1f ms replaying, worker CPU %.1f ms; %d failed workflow tasks in their histories (%.1f s; idle worker per second: CPU %.3f s, %.1f misses, %.1f runner tasks)",
		g.name, pct(g.acted), g.net.misses/n, g.net.hits/n, g.net.tasks/n, g.net.replaySec/n*1000, g.net.cpuSec/n*1000,
		g.failedTasks, g.seconds, g.idle.cpuSec, g.idle.misses, g.idle.tasks)
}

// wakeUps measures the drains after the last memory step.
func (e *env) wakeUps(ctx context.Context, w *workerProcess, pools []string) error {
	for _, p := range pools {
		if err := e.c.SignalWorkflow(ctx, workflows.PoolWorkflowID(p), "", workflows.SignalPause,
			workflows.OperatorRequest{Reason: "benchmark: wake-up measurement"}); err != nil {
			return fmt.Errorf("pause pool %s: %w", p, err)
		}
	}
	idle, err := w.idleWork(ctx)
	if err != nil {
		return err
	}
	oldest, err := e.runnersByStart(ctx, pools[0])
	if err != nil {
		return err
	}
	newest, err := e.runnersByStart(ctx, pools[len(pools)-1])
	if err != nil {
		return err
	}
	// A small run (the smoke test's) drains a few, not all, of its runners.
	n := min(wakeSample, max(1, len(oldest)/50))
	bySignal := oldest[:min(n, len(oldest))]
	byUpdate := oldest[len(bySignal):min(2*n, len(oldest))]
	newestBySignal := slices.DeleteFunc(slices.Clone(newest[max(0, len(newest)-n):]), func(id string) bool {
		return slices.Contains(bySignal, id) || slices.Contains(byUpdate, id)
	})
	for _, g := range []struct {
		name   string
		ids    []string
		update bool
	}{
		{"idle longest, drain signal", bySignal, false},
		{"idle longest, drain update", byUpdate, true},
		{"idle shortest, drain signal", newestBySignal, false},
	} {
		if len(g.ids) == 0 {
			continue
		}
		res, err := e.drainEach(ctx, w, g.name, g.ids, g.update)
		if err != nil {
			return err
		}
		res.net = res.net.since(workerWork{}, idle, res.seconds)
		res.idle = idle
		e.say("wake-up: %s", res)
	}
	return nil
}

// idleWork is the worker's work per second while nothing is asked of it.
func (w *workerProcess) idleWork(ctx context.Context) (workerWork, error) {
	before, err := w.readWork(ctx)
	if err != nil {
		return workerWork{}, err
	}
	select {
	case <-ctx.Done():
		return workerWork{}, ctx.Err()
	case <-time.After(wakeQuiet):
	}
	after, err := w.readWork(ctx)
	d := after.since(before, workerWork{}, 0)
	s := wakeQuiet.Seconds()
	return workerWork{cpuSec: d.cpuSec / s, misses: d.misses / s, hits: d.hits / s, tasks: d.tasks / s, replaySec: d.replaySec / s}, err
}

// runnersByStart lists a pool's running runner workflows, first started first.
func (e *env) runnersByStart(ctx context.Context, pool string) ([]string, error) {
	var all []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := e.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = %q AND RunnerPool = %q%s", workflows.RunnerWorkflowType, pool, runningOnly),
			PageSize:      1000,
			NextPageToken: token,
		})
		if err != nil {
			return nil, err
		}
		all = append(all, resp.GetExecutions()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	slices.SortFunc(all, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		return cmp.Compare(a.GetStartTime().AsTime().UnixNano(), b.GetStartTime().AsTime().UnixNano())
	})
	ids := make([]string, 0, len(all))
	for _, x := range all {
		ids = append(ids, x.GetExecution().GetWorkflowId())
	}
	return ids, nil
}

// drainEach drains the runners one after another, waits for them to end, and reads the
// worker's counters around it all (gross: the caller subtracts the idle worker's share).
func (e *env) drainEach(ctx context.Context, w *workerProcess, name string, ids []string, update bool) (wakeGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, wakeDrainTimeout)
	defer cancel()
	g := wakeGroup{name: name}
	before, err := w.readWork(ctx)
	if err != nil {
		return g, err
	}
	began := time.Now()
	var took []time.Duration
	for _, id := range ids {
		d, err := e.drainOne(ctx, id, update)
		if err != nil {
			return g, fmt.Errorf("drain %s: %w", id, err)
		}
		took = append(took, d)
	}
	for _, id := range ids {
		failed, err := e.waitClosed(ctx, id)
		if err != nil {
			return g, err
		}
		g.failedTasks += failed
	}
	g.seconds = time.Since(began).Seconds()
	after, err := w.readWork(ctx)
	if err != nil {
		return g, err
	}
	// The caller subtracts the idle worker's share.
	g.acted, g.net = summarize(took), after.since(before, workerWork{}, 0)
	return g, nil
}

// drainOne drains one runner and returns how long it took to act on it.
func (e *env) drainOne(ctx context.Context, id string, update bool) (time.Duration, error) {
	req := workflows.DrainRequest{Reason: "benchmark: wake-up measurement"}
	if update {
		t := time.Now()
		h, err := e.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: workflows.UpdateDrain, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{req},
		})
		if err != nil {
			return 0, err
		}
		var res workflows.DrainResult
		if err := h.Get(ctx, &res); err != nil {
			return 0, err
		}
		return time.Since(t), nil
	}
	if err := e.c.SignalWorkflow(ctx, id, "", workflows.SignalDrain, req); err != nil {
		return 0, err
	}
	var took time.Duration
	err := poll(ctx, "runner "+id+" to take its drain signal", func() (bool, error) {
		var ok bool
		var err error
		took, ok, err = e.signalTaken(ctx, id)
		return ok, err
	})
	return took, err
}

// signalTaken reads a runner's history: from its drain signal to the first workflow task
// completed after it, by the server's clock; false while no task has completed since.
func (e *env) signalTaken(ctx context.Context, id string) (time.Duration, bool, error) {
	var signaled, completed *historypb.HistoryEvent
	it := e.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, false, err
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalDrain {
				signaled, completed = ev, nil
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if signaled != nil && completed == nil {
				completed = ev
			}
		}
	}
	if signaled == nil || completed == nil {
		return 0, false, nil
	}
	return completed.GetEventTime().AsTime().Sub(signaled.GetEventTime().AsTime()), true, nil
}

// waitClosed waits until the runner workflow has ended and counts its failed workflow tasks.
func (e *env) waitClosed(ctx context.Context, id string) (int, error) {
	err := poll(ctx, "runner "+id+" to end after its drain", func() (bool, error) {
		d, err := e.c.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, err
	})
	if err != nil {
		return 0, err
	}
	failed := 0
	it := e.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return failed, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			failed++
		}
	}
	return failed, nil
}
