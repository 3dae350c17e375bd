package workflows

import (
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// The pool's side of prewarming (issue 39): a pool whose spec has prewarm on follows the
// workflow runs its job events name, reads each run's graph once (ReadRunGraph), and counts
// the runners PlanPrewarm warms for the run's predicted jobs into Decide's demand. The rules
// are pure (prewarm_plan.go, prewarm_predict.go); this file asks the gate, starts the reads
// and hands the count over.

// changePrewarm gates everything a prewarming pool issues for it: its graph reads and the
// runners it starts ahead of predicted jobs. Asked only when the pool's spec has prewarm on,
// so the histories of pools without it carry no marker and replay unchanged.
const changePrewarm = "prewarm"

// askPrewarm is changePrewarm's one GetVersion call, for its gate.
func askPrewarm(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changePrewarm, workflow.DefaultVersion, 1)
}

// poolPrewarm is one run of the pool's prewarm bookkeeping; what outlives the run is
// PoolState.Prewarm.
type poolPrewarm struct {
	gate gate
	// reading are the runs whose graph is being read; continue-as-new waits for them.
	reading []prewarmRunRef
	// want, why and wake are the last plan's (PlanPrewarm): the runners warmed, for which
	// jobs, and when the plan next changes by itself.
	want int
	why  string
	wake time.Time
}

// prewarmRunRef names one run.
type prewarmRunRef struct {
	repo  string
	runID int64
}

// prewarmOn reports whether the pool prewarms: its spec has prewarm on and the change is in
// force (asked the first time only, and only then).
func (p *poolRun) prewarmOn() bool {
	if !p.st.Spec.PrewarmOn() {
		return false
	}
	if p.prewarm.gate.ask == nil {
		p.prewarm.gate.ask = askPrewarm
	}
	return p.prewarm.gate.inForce(p.ctx)
}

// observePrewarm hands a batch's events to the prewarm memory (ObservePrewarm).
func (p *poolRun) observePrewarm(batch ReservationBatch, now time.Time) {
	if len(batch.Events) == 0 || !p.prewarmOn() {
		return
	}
	st := ObservePrewarm(p.prewarmState(), batch.Events, now)
	p.st.Prewarm = &st
}

// tendPrewarm starts the graph reads of runs not read yet, then plans the runners warmed for
// predicted jobs (PlanPrewarm). A spec that turned prewarm off forgets the memory; runners
// already warmed are then the pool's like any other, let go by the scale-down.
func (p *poolRun) tendPrewarm(now time.Time) {
	p.prewarm.want, p.prewarm.why, p.prewarm.wake = 0, "", time.Time{}
	if !p.prewarmOn() {
		p.st.Prewarm = nil
		return
	}
	st := p.prewarmState()
	for _, run := range RunsToRead(st) {
		p.readRunGraph(run, KnownPath(st, run))
	}
	plan := PlanPrewarm(PrewarmPlanInput{
		State: st, Now: now, PoolLabels: p.st.Spec.Labels, Taken: p.takenJobs(now),
		StartLatency: StartLatency(st.StartLatencies), Grace: p.st.Spec.PrewarmGraceOrDefault(),
	})
	if plan.Released > 0 {
		plan.State.Released += plan.Released
		plan.State.ReleasedUntil = now.Add(p.st.Spec.PrewarmGraceOrDefault())
	}
	if !now.Before(plan.State.ReleasedUntil) {
		plan.State.Released = 0
	}
	p.st.Prewarm = &plan.State
	p.prewarm.want, p.prewarm.why, p.prewarm.wake = plan.Want, plan.Why, plan.WakeAt
	if plan.Released > 0 {
		p.logger.Info("Predicted jobs not coming: their runners go", "runners", plan.Released)
	}
}

// prewarmState is the memory, empty before the first event.
func (p *poolRun) prewarmState() PrewarmState {
	if p.st.Prewarm == nil {
		return PrewarmState{}
	}
	return *p.st.Prewarm
}

// readRunGraph reads one run's graph beside the loop, once, at the path its workflow's file
// was last read from when there is one (one call, not two): a failed read (after the
// policy's retries) is recorded as the run's missing graph, and the run is predicted nothing.
func (p *poolRun) readRunGraph(run PrewarmRun, path string) {
	ref := prewarmRunRef{repo: run.Repository, runID: run.RunID}
	if slices.Contains(p.prewarm.reading, ref) {
		return
	}
	p.prewarm.reading = append(p.prewarm.reading, ref)
	in := ReadRunGraphInput{Repository: run.Repository, HeadSHA: run.HeadSHA, RunID: run.RunID, Path: path, Workflow: run.Workflow}
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		res, err := runActivity[ReadRunGraphInput, ReadRunGraphResult](ctx, RunGraphReadPolicy, ActivityReadRunGraph, in)
		p.prewarm.reading = slices.DeleteFunc(p.prewarm.reading, func(r prewarmRunRef) bool { return r == ref })
		p.changed = true
		failure := ""
		if err != nil {
			failure = firstLine(err.Error())
			p.logger.Warn("Reading a run's graph failed: no prediction for it", "repository", in.Repository, "runID", in.RunID, "error", err)
		}
		if p.st.Prewarm != nil {
			st := PrewarmGraphRead(*p.st.Prewarm, in.Repository, in.RunID, res, failure)
			p.st.Prewarm = &st
		}
	})
}

// takenJobs are the jobs the pool's busy runners run, since they went busy, each marked
// Elsewhere when busyElsewhere counts its runner (no reservation of the pool holds it).
func (p *poolRun) takenJobs(now time.Time) []TakenJob {
	var out []TakenJob
	for _, r := range p.st.Runners {
		if r.Busy && r.JobID != 0 {
			elsewhere := !r.JobDone && !r.State.Terminal() && !p.st.Reserved.Holds(r.JobID, now)
			out = append(out, TakenJob{JobID: r.JobID, At: r.Since, Elsewhere: elsewhere})
		}
	}
	return out
}

// released is the runners warmed for predictions that failed and not let go yet.
func (p *poolRun) released() int {
	if p.st.Prewarm == nil {
		return 0
	}
	return p.st.Prewarm.Released
}

// firstLine keeps a failure's first line, for the state.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// measureStart records how long a runner took from the pool's decision to online, for the
// start latency prewarming plans with (StartLatency). State only, and only in a pool that
// prewarms: it issues no command.
func (p *poolRun) measureStart(r PoolRunner, to RunnerState, now time.Time) {
	if p.st.Prewarm == nil || r.StartedAt.IsZero() || (to != RunnerIdle && to != RunnerBusy) ||
		(r.State != RunnerPending && r.State != RunnerRegistering) {
		return
	}
	st := RecordStartLatency(*p.st.Prewarm, now.Sub(r.StartedAt))
	p.st.Prewarm = &st
}
