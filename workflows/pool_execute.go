package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
)

// ActivityEnsureSlotClaims makes sure a stateful slot's PersistentVolumeClaims exist before
// the slot's next runner starts: create, or adopt a claim this pool made earlier; a claim of
// that name not labelled for this pool is NotOwned and never adopted. Claims outlive runners
// so the next runner in the slot mounts the same volume.
const ActivityEnsureSlotClaims = "EnsureSlotClaims"

// EnsureSlotClaimsInput names one slot's claims and their templates.
type EnsureSlotClaimsInput struct {
	Pool      string      `json:"pool"`
	Namespace string      `json:"namespace"`
	Slot      int         `json:"slot"`
	Claims    []SlotClaim `json:"claims"`
}

// SlotClaim is one claim of a slot: its name and the template it is made from.
type SlotClaim struct {
	Name     string                       `json:"name"`
	Template corev1.PersistentVolumeClaim `json:"template"`
}

// EnsureSlotClaimsResult lists the claims created now (the rest already existed).
type EnsureSlotClaimsResult struct {
	Created []string `json:"created,omitempty"`
}

func ensureSlotClaims(ctx workflow.Context, in EnsureSlotClaimsInput) (EnsureSlotClaimsResult, error) {
	var out EnsureSlotClaimsResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, KubernetesActivityPolicy), ActivityEnsureSlotClaims, in).Get(ctx, &out)
	return out, err
}

func listRunners(ctx workflow.Context, in ListRunnersInput) (ListRunnersResult, error) {
	var out ListRunnersResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, PoolListingPolicy), ActivityListRunners, in).Get(ctx, &out)
	return out, err
}

// execute carries out a plan: drains first (so a rollout frees capacity), then starts.
func (p *poolRun) execute(plan Plan, now time.Time) {
	if p.st.Mode == PoolPaused {
		return
	}
	if plan.ScaleOut {
		p.st.LastScaleOut = now
	}
	var drained, started []string
	for _, d := range plan.Drain {
		r := &p.st.Runners[p.find(d.Name)]
		r.Draining, r.DrainReason = true, d.Reason
		// A runner whose workflow does not exist yet gets the drain once its start is
		// acknowledged (runRunner); a signal now would find no workflow.
		if r.Started {
			p.signal(d.Name, SignalDrain, DrainRequest{Reason: d.Reason})
		}
		drained = append(drained, d.Name)
	}
	var batch []RunnerInput
	batched := len(plan.Start) > 0 && p.startsInBatches()
	for _, s := range plan.Start {
		in := p.start(s, now)
		started = append(started, in.Name)
		if batched && len(in.SlotVolumes) == 0 {
			batch = append(batch, in) // a stateful slot's claims come first: it starts alone
			continue
		}
		p.inflight++
		workflow.Go(p.ctx, func(ctx workflow.Context) { p.runRunner(ctx, in) })
	}
	if len(batch) > 0 {
		p.startBatch(batch)
	}
	if len(drained) > 0 || len(started) > 0 || plan.Desired != p.st.LastDesired {
		p.st.Decisions = appendBounded(p.st.Decisions, Decision{At: now, Desired: plan.Desired, Started: started, Drained: drained, Why: plan.Why}, PoolDecisionsKept)
		p.logger.Info("Pool decision", "desired", plan.Desired, "started", len(started), "drained", len(drained), "why", plan.Why)
	}
	p.st.LastDesired = plan.Desired
}

// start records a new runner and returns the input its workflow starts with: in a batch
// (startBatch), or as an abandoned child (runRunner) before changeStartInBatches and for a
// stateful slot. The runner's own reports are how the pool follows it; a child's completion is
// only a backstop for a runner workflow that ended without reporting (e.g. terminated by hand).
//
// A runner takes a warm registration when the pool holds one: it starts under that name and
// creates its pod without a GitHub call.
func (p *poolRun) start(s StartRunner, now time.Time) RunnerInput {
	spec := p.st.Spec
	seq := p.st.NextSeq
	name := RunnerName(spec.Name, p.st.Generation, seq)
	var reg *RegisterRunnerOutput
	if w, ok := p.takeWarm(now); ok {
		seq, name = w.Seq, w.Name
		reg = &RegisterRunnerOutput{RunnerID: w.RunnerID, SecretName: w.SecretName, SecretUID: w.SecretUID, SecretNamespace: w.SecretNamespace}
	} else {
		p.st.NextSeq++
	}
	r := PoolRunner{Name: name, Seq: seq, TemplateHash: p.st.TemplateHash, State: RunnerPending, StartedAt: now, Since: now, Warm: reg != nil}
	in := RunnerInput{Pool: spec.Name, Name: name, Spec: spec.runnerSpec(p.st.TemplateHash), Warm: reg}
	if p.st.ScaleSet != nil {
		in.Spec.ScaleSetID = p.st.ScaleSet.ScaleSetID
	}
	if workflow.GetVersion(p.ctx, changeWatchRegistration, workflow.DefaultVersion, 1) >= 1 {
		r.Watched, in.PoolWatches = true, true
	}
	if spec.Stateful() {
		r.Stateful, r.Slot = true, s.Slot
		in.Slot, in.SlotVolumes = s.Slot, spec.slotVolumes(s.Slot)
	}
	p.st.Runners = append(p.st.Runners, r)
	p.st.Totals.Started++
	// A new runner is seen online through the listing: list soon, not at the idle pace.
	if soon := now.Add(PoolListingIntervalStarting); p.st.NextListing.After(soon) {
		p.st.NextListing = soon
	}
	return in
}

func (p *poolRun) runRunner(ctx workflow.Context, in RunnerInput) {
	if len(in.SlotVolumes) > 0 {
		_, err := ensureSlotClaims(ctx, p.slotClaims(in.Slot))
		switch i := p.find(in.Name); {
		case err != nil:
			p.inflight--
			p.forget(in.Name, RunnerFailed, "slot claims: "+err.Error())
			p.unusedWarm(in, "runner did not start")
			return
		case i >= 0 && p.st.Runners[i].Draining:
			p.inflight--
			p.forget(in.Name, RunnerDone, "drained before it started")
			p.unusedWarm(in, "drained before it started")
			return
		}
	}
	opts := RunnerChildPolicy(RunnerWorkflowID(in.Pool, in.Name))
	if p.lean {
		// Set at the start, where they cost nothing; the runner upserts only idle and busy.
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(
			SearchAttrRunnerState.ValueSet(string(RunnerPending)), SearchAttrPool.ValueSet(in.Pool))
	}
	cctx := workflow.WithChildOptions(ctx, opts)
	child := workflow.ExecuteChildWorkflow(cctx, RunnerWorkflowType, in)
	err := child.GetChildWorkflowExecution().Get(ctx, nil)
	p.inflight--
	p.changed = true
	if err != nil {
		p.forget(in.Name, RunnerFailed, "runner workflow did not start: "+err.Error())
		if !temporal.IsWorkflowExecutionAlreadyStartedError(err) { // else that workflow owns it
			p.unusedWarm(in, "runner did not start")
		}
		return
	}
	p.started(in.Name)
	var res RunnerResult
	err = child.Get(ctx, &res)
	if p.find(in.Name) < 0 {
		return // the runner reported its end, as it should
	}
	switch {
	case err != nil:
		p.forget(in.Name, RunnerFailed, "runner workflow ended without a report: "+err.Error())
	case res.FinalState.Terminal():
		p.forget(in.Name, res.FinalState, res.Reason)
	default:
		p.forget(in.Name, RunnerDone, "runner workflow ended without a report")
	}
}

func (p *poolRun) slotClaims(slot int) EnsureSlotClaimsInput {
	spec := p.st.Spec
	in := EnsureSlotClaimsInput{Pool: spec.Name, Namespace: spec.Namespace, Slot: slot}
	for _, t := range spec.VolumeClaimTemplates {
		in.Claims = append(in.Claims, SlotClaim{Name: SlotClaimName(spec.Name, t.Name, slot), Template: *t.DeepCopy()})
	}
	return in
}

// signal sends a signal to one runner workflow without blocking the loop. A runner workflow
// that no longer exists has ended without the pool hearing of it: the pool forgets it.
func (p *poolRun) signal(runner, name string, arg any) {
	p.inflight++
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		err := workflow.SignalExternalWorkflow(ctx, RunnerWorkflowID(p.st.Spec.Name, runner), "", name, arg).Get(ctx, nil)
		p.inflight--
		p.changed = true
		var gone *temporal.UnknownExternalWorkflowExecutionError
		switch {
		case errors.As(err, &gone):
			p.forget(runner, RunnerDone, "runner workflow ended without a report (not found when signalled "+name+")")
		case err != nil:
			p.logger.Warn("Signal to runner failed", "runner", runner, "signal", name, "error", err)
		}
	})
}

// changeWatchRegistration gates the pool watching its runners' registration deadlines
// (RunnerInput.PoolWatches): a runner the pool starts holds no timer of its own while it
// registers or runs, and the pool asks a runner that has not reported idle or busy within its
// registration timeout to check its registration (SignalCheckRegistration). Every runner used
// to hold one durable timer, a billable action each, for a deadline that almost never passes;
// the pool already wakes for its listing while runners register, so its checks cost nothing
// until one is due. A runner workflow that no longer exists (terminated by hand before it
// reported) fails the signal, and the pool forgets and replaces it, as a child's completion
// told it before changeStartInBatches.
const changeWatchRegistration = "pool-watches-registration"
