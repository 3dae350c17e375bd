package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"
)

// ActivityStartRunnerWorkflows starts a batch of runner workflows, concurrently, and says
// which could not be started (activities.TemporalActivities).
//
// Why an activity rather than child workflows (changeStartInBatches): a child start is billed
// twice (the parent's command and the child's own start) and costs the pool two history events
// and a workflow task of its own per runner. On a burst that made the pool the bottleneck: with
// 500 warm registrations ready, runner workflows started a median 29 s after the pool had
// decided to start them. One activity per plan starts all of the plan's runners; the runners
// are no longer the pool's children. The pool follows them as it always did, by their reports,
// and by its listing (a runner the listing finds gone whose workflow no longer takes a signal is
// forgotten); only the backstop a child's completion gave (a runner workflow terminated by hand
// before it ever reported) is gone.
//
// Idempotent: each runner's workflow id is its name, unique in the pool, and a start that finds
// that workflow (running or ended, from an earlier attempt of the same batch) counts as started.
const ActivityStartRunnerWorkflows = "StartRunnerWorkflows"

// StartRunnerWorkflowsInput is one plan's runners, started with RunnerState=pending and
// RunnerPool set (as the pool's child starts were since changeLeanRunners).
type StartRunnerWorkflowsInput struct {
	Pool    string        `json:"pool"`
	Runners []RunnerInput `json:"runners"`
}

// StartRunnerWorkflowsOutput names the runners whose workflow will not start (a refusal no
// retry changes); every other runner of the batch was started.
type StartRunnerWorkflowsOutput struct {
	Failed []RunnerStartFailure `json:"failed,omitempty"`
}

// RunnerStartFailure is one runner whose workflow was refused, and why.
type RunnerStartFailure struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// ActivitySignalRunnerStatuses tells a batch of a pool's runners what a listing found of them
// (SignalRunnerStatus each, concurrently) and names the runners whose workflow no longer exists
// (activities.TemporalActivities). Why an activity rather than a signal each from the pool
// (changeListingTellsInBatches): a signal costs the pool two history events and a workflow task
// to learn it was delivered; a burst's listing told a pool's 250 starting runners they were
// online, nearly 900 signals a burst and as many of the pool's workflow tasks. A status told
// twice (a retried batch) is the same status, which a runner takes as once.
const ActivitySignalRunnerStatuses = "SignalRunnerStatuses"

// SignalRunnerStatusesInput is one listing's news for some of a pool's runners.
type SignalRunnerStatusesInput struct {
	Pool    string               `json:"pool"`
	Updates []RunnerStatusUpdate `json:"updates"`
}

// RunnerStatusUpdate is one runner's status from a listing.
type RunnerStatusUpdate struct {
	Runner string             `json:"runner"`
	Status RunnerStatusSignal `json:"status"`
}

// SignalRunnerStatusesOutput names the runners whose workflow was not found (ended without a
// report); every other runner of the batch was told.
type SignalRunnerStatusesOutput struct {
	Gone []string `json:"gone,omitempty"`
}

// changeStartInBatches gates starting a plan's runners with one StartRunnerWorkflows activity
// instead of a child workflow each (see ActivityStartRunnerWorkflows).
const changeStartInBatches = "start-runners-in-batches"

// startsInBatches reports whether this pool starts runners with StartRunnerWorkflows. Asked
// only when a plan starts runners, so a pool that starts none carries no marker.
func (p *poolRun) startsInBatches() bool {
	return workflow.GetVersion(p.ctx, changeStartInBatches, workflow.DefaultVersion, 1) >= 1
}

// startBatch starts the runners of one plan beside the loop, at most RunnerStartBatchSize a
// call; the pool learns the outcome as it learns a child's start.
func (p *poolRun) startBatch(runners []RunnerInput) {
	for chunk := range slices.Chunk(runners, RunnerStartBatchSize) {
		in := StartRunnerWorkflowsInput{Pool: p.st.Spec.Name, Runners: chunk}
		p.inflight++
		workflow.Go(p.ctx, func(ctx workflow.Context) {
			in.Runners = p.placeBatch(ctx, in.Runners)
			out, err := runActivity[StartRunnerWorkflowsInput, StartRunnerWorkflowsOutput](ctx, RunnerStartPolicy, ActivityStartRunnerWorkflows, in)
			p.inflight--
			p.changed = true
			refused := map[string]string{}
			for _, f := range out.Failed {
				refused[f.Name] = f.Reason
			}
			for _, r := range in.Runners {
				reason, failed := refused[r.Name]
				if err != nil {
					reason, failed = err.Error(), true
				}
				if failed {
					p.forget(r.Name, RunnerFailed, fmt.Sprintf("runner workflow did not start: %s", reason))
					p.unusedWarm(r, "runner did not start")
					continue
				}
				p.started(r.Name)
			}
		})
	}
}

// started records that a runner's workflow exists, and hands it a drain that came before.
func (p *poolRun) started(name string) {
	i := p.find(name)
	if i < 0 {
		return
	}
	r := &p.st.Runners[i]
	r.Started = true
	if r.Draining {
		p.signal(name, SignalDrain, DrainRequest{Reason: r.DrainReason})
	}
}
