package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// A scale-set pool's upkeep of its set, the scale-set source's periodic work (tend): bring the set
// to the spec (create or adopt it, again after GitHub deleted it), keep its listener running and
// told the pool's maximum, and delete the sets the pool moved on from once their runners ended.

// changeScaleSetLeaveAfterRunners gates deleting a set the pool moved on from only once the
// runners it had then have ended: before it the set was deleted at once, under runners that
// might still run its jobs. Asked only by a pool that leaves a set.
const changeScaleSetLeaveAfterRunners = "scaleset-leave-after-runners"

// tend is the set's step in the pool's loop: bring the set to the spec (create or adopt it),
// then keep a listener of it running.
func (p *scaleSetDemand) tend(now time.Time) {
	if !p.scaleSetOn() {
		p.st.ScaleSet = nil
		return
	}
	if p.st.ScaleSet == nil {
		p.st.ScaleSet = &PoolScaleSetState{}
	}
	st := p.st.ScaleSet
	if !st.ExcessSince.IsZero() && !now.Before(st.ExcessSince.Add(ScaleSetLedgerExcessHold)) {
		p.boundScaleSetLedger(now)
	}
	if p.working || now.Before(st.RetryAt) {
		return
	}
	in := p.scaleSetEnsureInput()
	switch key := scaleSetKey(in); {
	case st.ScaleSetID == 0 || st.Key != key:
		p.ensureScaleSet(in, key)
	case !st.Listening:
		p.startScaleSetListener(now)
	case st.ListenerMax != p.bounds(now).Max:
		p.tellListenerCapacity(p.bounds(now).Max)
	case p.leftSetDue() >= 0:
		p.deleteLeftScaleSet(p.leftSetDue())
	}
}

// tellListenerCapacity sends the listener the pool's new maximum (an apply, a scale, an
// override). A signal that fails is sent again at the next iteration.
func (p *scaleSetDemand) tellListenerCapacity(maxRunners int) {
	id := p.st.ScaleSet.ScaleSetID
	p.working = true
	p.inflight++
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.working, p.changed = false, true; p.inflight-- }()
		err := workflow.SignalExternalWorkflow(ctx, ScaleSetListenerWorkflowID(p.st.Spec.Name, id), "",
			SignalScaleSetCapacity, ScaleSetCapacity{MaxCapacity: maxRunners}).Get(ctx, nil)
		st := p.st.ScaleSet
		switch {
		case st == nil || st.ScaleSetID != id:
		case err != nil:
			st.RetryAt = workflow.Now(ctx).Add(ScaleSetListenerRestartDelay)
		default:
			st.ListenerMax = maxRunners
		}
	})
}

func (p *scaleSetDemand) scaleSetEnsureInput() EnsureScaleSetInput {
	spec := p.st.Spec
	return EnsureScaleSetInput{
		Scope: spec.Scope(), RunnerGroup: spec.RunnerGroup,
		Name: spec.ScaleSet.withDefaults(spec.Name).Name, Labels: spec.Labels,
	}
}

// scaleSetKey describes the set as the spec wants it; json.Marshal of these fields cannot fail.
func scaleSetKey(in EnsureScaleSetInput) string {
	b, _ := json.Marshal(in)
	return string(b)
}

// ensureScaleSet creates or adopts the set beside the loop. A set that is another than the
// one listened to (the spec names another) ends the old listener; its messages are ignored
// from then on, and its jobs start over with the new set's.
func (p *scaleSetDemand) ensureScaleSet(in EnsureScaleSetInput, key string) {
	p.working = true
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.working, p.changed = false, true }()
		out, err := runActivity[EnsureScaleSetInput, EnsureScaleSetOutput](ctx, ScaleSetActivityPolicy, ActivityEnsureScaleSet, in)
		st := p.st.ScaleSet
		if st == nil {
			return
		}
		if err != nil {
			p.logger.Warn("Scale set not brought to the spec", "error", err)
			st.Error, st.RetryAt = err.Error(), workflow.Now(ctx).Add(ScaleSetListenerRestartDelay)
			return
		}
		if old := st.ScaleSetID; old != 0 && old != out.ScaleSetID {
			p.leaveScaleSet(ctx, *st)
		}
		if st.ScaleSetID != out.ScaleSetID {
			*st = PoolScaleSetState{ScaleSetID: out.ScaleSetID, Recreated: st.Recreated, Error: st.Error, Left: st.Left,
				NameOnlyLabels: st.NameOnlyLabels}
		}
		st.Key, st.NameOnlyLabels = key, out.NameOnlyLabels
		if out.NameOnlyLabels {
			p.logger.Warn("The service kept only the scale set's name as its label: jobs reach it by runs-on naming the set",
				"scaleSet", out.ScaleSetID, "labels", in.Labels)
		}
		p.logger.Info("Scale set ready", "scaleSet", out.ScaleSetID, "created", out.Created, "updated", out.Updated)
	})
}

// leaveScaleSet ends the listener of a set the pool moved on from (the spec names another
// set, scope or group) and deletes that set at GitHub unless the spec keeps it. Best effort:
// a set left behind is GitHub's to expire, and the operator's to delete.
func (p *scaleSetDemand) leaveScaleSet(ctx workflow.Context, old PoolScaleSetState) {
	if old.Listening {
		err := workflow.RequestCancelExternalWorkflow(ctx, ScaleSetListenerWorkflowID(p.st.Spec.Name, old.ScaleSetID), "").Get(ctx, nil)
		if err != nil {
			p.logger.Warn("Old scale-set listener not cancelled", "scaleSet", old.ScaleSetID, "error", err)
		}
	}
	var was EnsureScaleSetInput
	if p.st.Spec.ScaleSet == nil || p.st.Spec.ScaleSet.KeepOnDelete || json.Unmarshal([]byte(old.Key), &was) != nil {
		return
	}
	if workflow.GetVersion(ctx, changeScaleSetLeaveAfterRunners, workflow.DefaultVersion, 1) >= 1 {
		// Deleted once its runners have ended (deleteLeftScaleSets): a job one runs completes.
		left := LeftScaleSet{ScaleSetID: old.ScaleSetID, Scope: was.Scope}
		for _, r := range p.st.Runners {
			if !r.State.Terminal() {
				left.Runners = append(left.Runners, r.Name)
			}
		}
		p.st.ScaleSet.Left = append(p.st.ScaleSet.Left, left)
		return
	}
	p.deleteScaleSet(ctx, was.Scope, old.ScaleSetID)
}

// deleteScaleSet deletes a set at GitHub. Best effort: a set left behind is GitHub's to
// expire, and the operator's to delete.
func (p *scaleSetDemand) deleteScaleSet(ctx workflow.Context, scope Scope, id int64) {
	in := DeleteScaleSetInput{Scope: scope, ScaleSetID: id}
	if _, err := runActivity[DeleteScaleSetInput, DeleteScaleSetOutput](ctx, ScaleSetActivityPolicy, ActivityDeleteScaleSet, in); err != nil {
		p.logger.Warn("Old scale set not deleted", "scaleSet", id, "error", err)
	}
}

// leftSetDue is the first set the pool left whose runners have all ended, or were removed by
// an operator (-1: none).
func (p *scaleSetDemand) leftSetDue() int {
	return slices.IndexFunc(p.st.ScaleSet.Left, func(l LeftScaleSet) bool { return !p.anyRunnerOf(l.Runners) })
}

// deleteLeftScaleSet deletes the i-th set the pool left, beside the loop.
func (p *scaleSetDemand) deleteLeftScaleSet(i int) {
	left := p.st.ScaleSet.Left[i]
	p.working = true
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.working, p.changed = false, true }()
		p.deleteScaleSet(ctx, left.Scope, left.ScaleSetID)
		if st := p.st.ScaleSet; st != nil {
			st.Left = slices.DeleteFunc(st.Left, func(l LeftScaleSet) bool { return l.ScaleSetID == left.ScaleSetID })
			if len(st.Left) == 0 {
				st.Left = nil
			}
		}
	})
}

// anyRunnerOf reports whether any of the named runners is still the pool's and not ended.
func (p *scaleSetDemand) anyRunnerOf(names []string) bool {
	return slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool {
		return !r.State.Terminal() && slices.Contains(names, r.Name)
	})
}

// startScaleSetListener starts the set's listener as a child that outlives the pool's run
// (ABANDON). A listener of this set already running (started by an earlier run) is the one.
func (p *scaleSetDemand) startScaleSetListener(now time.Time) {
	st := p.st.ScaleSet
	in := ScaleSetListenerInput{
		Pool: p.st.Spec.Name, Scope: p.st.Spec.Scope(), ScaleSetID: st.ScaleSetID, MaxCapacity: p.bounds(now).Max,
		ContinueAsNewAfter: p.listenerCANAfter,
	}
	p.working = true
	p.inflight++
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.working, p.changed = false, true; p.inflight-- }()
		opts := ScaleSetListenerChildPolicy(ScaleSetListenerWorkflowID(in.Pool, in.ScaleSetID))
		if askPoolDecidesApart(ctx) >= 1 {
			opts.TaskQueue = DecisionTaskQueue
		}
		cctx := workflow.WithChildOptions(ctx, opts)
		err := workflow.ExecuteChildWorkflow(cctx, ScaleSetListenerWorkflowType, in).GetChildWorkflowExecution().Get(ctx, nil)
		if st := p.st.ScaleSet; st == nil || st.ScaleSetID != in.ScaleSetID {
			return
		}
		if err != nil && !isAlreadyStarted(err) {
			p.logger.Warn("Scale-set listener not started", "error", err)
			p.st.ScaleSet.Error = fmt.Sprintf("listener not started: %v", err)
			p.st.ScaleSet.RetryAt = workflow.Now(ctx).Add(ScaleSetListenerRestartDelay)
			return
		}
		p.st.ScaleSet.Listening, p.st.ScaleSet.ListenerMax = true, in.MaxCapacity
	})
}

func isAlreadyStarted(err error) bool {
	var started *temporal.ChildWorkflowExecutionAlreadyStartedError
	return errors.As(err, &started)
}
