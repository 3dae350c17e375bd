package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// registerHandlers installs the pool's query and updates. Validators reject bad requests before
// they reach history as accepted; handlers only record and mark the pool changed.
func (p *poolRun) registerHandlers() error {
	if err := workflow.SetQueryHandler(p.ctx, QueryStatus, p.status); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, UpdateApply, p.apply,
		workflow.UpdateHandlerOptions{Validator: p.validateApply}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, UpdateScale, p.scale,
		workflow.UpdateHandlerOptions{Validator: p.validateScale}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, UpdateForceRemoveRunner, p.forceRemoveRunner,
		workflow.UpdateHandlerOptions{Validator: p.validateForceRemoveRunner}); err != nil {
		return err
	}
	// No validator for reservations: ApplyReservationBatch skips events it cannot use, and one
	// odd event must not make the scale window drop its whole batch.
	return workflow.SetUpdateHandler(p.ctx, UpdateReservations, p.reserve)
}

// receiveSignals starts one receiver per signal. Each records and marks the pool changed; what
// is still queued at continue-as-new is taken by the drainers.
func (p *poolRun) receiveSignals() {
	receive(p, SignalRunnerState, p.onRunnerState)
	receive(p, SignalRunnerStates, func(b RunnerStateBatch) {
		for _, rep := range b.Reports {
			p.onRunnerState(rep)
		}
	})
	receive(p, SignalPause, func(r OperatorRequest) { p.setMode(PoolPaused, r.Reason) })
	receive(p, SignalResume, func(r OperatorRequest) { p.setMode(PoolActive, r.Reason) })
	receive(p, SignalDrain, func(r DrainRequest) { p.setMode(PoolDraining, r.Reason) })
	receive(p, SignalReservations, func(b ReservationBatch) { _, _ = p.reserve(p.ctx, b) })
	receive(p, SignalRunnerBlocked, p.onRunnerBlocked)
}

func (p *poolRun) setMode(mode PoolMode, reason string) {
	p.logger.Info("Pool mode changed", "from", p.st.Mode, "to", mode, "reason", reason)
	p.st.Mode, p.st.ModeReason = mode, reason
}

// onRunnerState records a runner's report. Reports of runners the pool no longer tracks (it
// already learned of their end another way) are ignored.
func (p *poolRun) onRunnerState(rep RunnerStateReport) {
	now := workflow.Now(p.ctx)
	i := p.find(rep.Runner)
	if i < 0 {
		return
	}
	if rep.EndedJob != 0 && rep.EndedJob != p.st.Runners[i].JobID {
		p.endJobID(rep.EndedJob) // a job the pool never saw this runner take
	}
	if rep.State.Terminal() {
		p.recordUnattributedEnd(p.st.Runners[i], rep)
		p.demand.hear(runnerEnd{last: p.st.Runners[i], report: rep})
		p.forget(rep.Runner, rep.State, rep.Reason)
		return
	}
	r := &p.st.Runners[i]
	p.measureStart(*r, rep.State, now)
	r.State, r.Since = rep.State, now
	if rep.State != RunnerPending && rep.State != RunnerRegistering {
		// Online or leaving: it waits for no room any more (so a lost report cannot leave it blocked).
		r.Blocked = nil
	}
	defer p.recordBlocked()
	r.Removing = r.Removing || rep.Removing
	if rep.RunnerID != 0 {
		r.RunnerID = rep.RunnerID
	}
	switch rep.State {
	case RunnerBusy:
		r.Busy = true
		p.st.Failures = 0
		if rep.JobID != 0 && rep.JobID != r.JobID {
			p.endJob(r) // a persistent runner that took its next job before reporting idle
			r.JobID = rep.JobID
			p.jobTaken(r.JobID, workflow.Now(p.ctx))
		}
	case RunnerIdle:
		r.Busy = false
		p.st.Failures = 0
		p.endJob(r)
	case RunnerPending, RunnerRegistering:
		r.Busy = false
	case RunnerDraining:
		// A leaving runner's job, if it has one, is served by it (finishing, or over): it
		// needs no other runner, so its reservation ends now rather than when the runner is
		// gone, and the pool does not start a runner for it in between. Whether it still
		// runs a job is its own word (before the change, a draining runner kept its last busy).
		if workflow.GetVersion(p.ctx, changeEndJobWithRunner, workflow.DefaultVersion, 1) >= 1 {
			r.Busy = rep.Busy
			p.endJob(r)
		}
	}
}

// forget removes an ended runner and remembers it; a failed runner backs off further starts.
func (p *poolRun) forget(name string, state RunnerState, reason string) {
	i := p.find(name)
	if i < 0 {
		return
	}
	now := workflow.Now(p.ctx)
	startedAt := p.st.Runners[i].StartedAt
	p.endJob(&p.st.Runners[i])
	p.st.Runners = slices.Delete(p.st.Runners, i, i+1)
	p.st.Finished = appendBounded(p.st.Finished, FinishedRunner{Name: name, State: state, At: now, Reason: reason}, PoolFinishedKept)
	p.st.Totals.Finished++
	p.recordBlocked()
	if state == RunnerFailed {
		p.st.Totals.Failed++
		if !countsAsNewFailure(p.st.Failures, startedAt, p.st.StartNotBefore) &&
			workflow.GetVersion(p.ctx, changeFailuresByStart, workflow.DefaultVersion, 1) >= 1 {
			p.logger.Warn("Runner failed; started before the backoff in force, which it keeps", "runner", name, "reason", reason)
			p.changed = true
			return
		}
		p.st.Failures++
		backoff := min(PoolFailureBackoff<<min(p.st.Failures-1, 16), PoolFailureBackoffMax)
		p.st.StartNotBefore = now.Add(backoff)
		p.logger.Warn("Runner failed", "runner", name, "reason", reason, "backoff", backoff)
	}
	p.changed = true
}

// countsAsNewFailure reports whether a failed runner doubles the pool's failure backoff: the
// first failure in a row does, and so does a runner started once the backoff in force had
// passed (a start after the last failure, which failed again). Runners that were already
// starting when that failure was counted failed with it — a burst's runners that never came
// online through one outage, a broken template's first batch — and keep the backoff as it is,
// so a burst of 20 such runners waits 30 s, not the 10-minute maximum (changeFailuresByStart).
func countsAsNewFailure(failures int, startedAt, startNotBefore time.Time) bool {
	return failures == 0 || !startedAt.Before(startNotBefore)
}

// Pool change ids (workflow.GetVersion); what each changes is in Changes (changes.go).
const (
	changeNewSpecRules    = "new-spec-rules"
	changeLeanRunners     = "lean-runners"
	changeFailuresByStart = "failures-by-start"
)

func appendBounded[T any](list []T, v T, limit int) []T {
	list = append(list, v)
	if len(list) > limit {
		list = slices.Clone(list[len(list)-limit:])
	}
	return list
}

// validateApply checks an applied spec with every rule, the newest included (ValidateNew): a
// validator runs only when an update arrives, never when a history replays.
func (p *poolRun) validateApply(req ApplyRequest) error {
	spec := req.Spec.WithDefaults()
	if spec.Name != p.st.Spec.Name {
		return fmt.Errorf("spec.name: %q cannot be applied to pool %q (a pool cannot be renamed)", spec.Name, p.st.Spec.Name)
	}
	if spec.IsScaleSet() != p.st.Spec.IsScaleSet() {
		// Its runners, demand and listener are another kind's: a new pool is the clean cut.
		return fmt.Errorf("spec.scaleSet: pool %q cannot become or stop being a scale set's; apply it as a new pool", spec.Name)
	}
	if errs := spec.ValidateNew(field.NewPath("spec")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// apply replaces the spec. Like kubectl apply, it keeps the operator's scale unless the applied
// file itself changes min or max; it never changes pause or drain.
func (p *poolRun) apply(_ workflow.Context, req ApplyRequest) (ApplyResult, error) {
	spec := req.Spec.WithDefaults()
	old := p.st.Spec
	hash := spec.TemplateHash()
	res := ApplyResult{Result: ApplyConfigured, TemplateHash: hash, Rollout: hash != p.st.TemplateHash}
	// The first apply normally arrives with the start (update-with-start) carrying the same spec.
	switch same := sameJSON(old, spec); {
	case same && !p.st.Applied:
		res.Result = ApplyCreated
	case same:
		res.Result = ApplyUnchanged
	}
	p.st.Applied = true
	if old.MinReplicas != spec.MinReplicas || !slices.Equal(ptrSlice(old.MaxReplicas), ptrSlice(spec.MaxReplicas)) {
		p.st.Scale = ScaleRequest{}
	}
	p.st.Spec, p.st.TemplateHash = spec, hash
	p.changed = true
	if res.Result != ApplyUnchanged {
		p.logger.Info("Pool spec applied", "result", res.Result, "templateHash", hash, "rollout", res.Rollout)
	}
	return res, nil
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

func ptrSlice(v *int) []int {
	if v == nil {
		return nil
	}
	return []int{*v}
}

// layered returns min and max as the operator's request would leave them, before clamping.
func (p *poolRun) layered(req ScaleRequest, now time.Time) (int, int) {
	scale := p.st.Scale
	if req.Min != nil {
		scale.Min = req.Min
	}
	if req.Max != nil {
		scale.Max = req.Max
	}
	b, _, _ := effectiveBounds(p.st.Spec, ScaleRequest{}, now)
	if scale.Min != nil {
		b.Min = *scale.Min
	}
	if scale.Max != nil {
		b.Max = *scale.Max
	}
	return b.Min, b.Max
}

func (p *poolRun) validateScale(req ScaleRequest) error {
	if req.Min == nil && req.Max == nil {
		return fmt.Errorf(`scale: set "min", "max" or both, e.g. {"min":1,"max":5}`)
	}
	if req.Min != nil && *req.Min < 0 {
		return fmt.Errorf("scale: min must be >= 0, got %d", *req.Min)
	}
	if req.Max != nil && (*req.Max < 0 || *req.Max > MaxPoolReplicas) {
		return fmt.Errorf("scale: max must be between 0 and %d, got %d", MaxPoolReplicas, *req.Max)
	}
	if minR, maxR := p.layered(req, workflow.Now(p.ctx)); minR > maxR {
		return fmt.Errorf("scale: min (%d) must be <= max (%d)", minR, maxR)
	}
	return nil
}

// scale records the operator's bounds. An explicit scale-down takes effect at once: the
// scale-down delay guards against demand flapping, not against the operator.
func (p *poolRun) scale(_ workflow.Context, req ScaleRequest) (ScaleResult, error) {
	now := workflow.Now(p.ctx)
	before := p.bounds(now)
	if req.Min != nil {
		p.st.Scale.Min = ptr(*req.Min)
	}
	if req.Max != nil {
		p.st.Scale.Max = ptr(*req.Max)
	}
	after := p.bounds(now)
	if after.Min < before.Min || after.Max < before.Max {
		p.st.LastScaleOut = time.Time{}
	}
	p.logger.Info("Pool scaled by operator", "min", after.Min, "max", after.Max)
	p.changed = true
	return ScaleResult{Bounds: after}, nil
}

// validateForceRemoveRunner accepts a force-remove of one of the pool's own runners, with a
// reason, once its workflow exists (before that there is nothing to signal).
func (p *poolRun) validateForceRemoveRunner(req ForceRemoveRunnerRequest) error {
	if strings.TrimSpace(req.Reason) == "" {
		return fmt.Errorf(`force-remove-runner: a reason is required, e.g. {"runner":"<name>","reason":"job stuck"}`)
	}
	i := p.find(req.Runner)
	switch {
	case i < 0:
		return fmt.Errorf("force-remove-runner: pool %s has no runner %q (it may have ended already)", p.st.Spec.Name, req.Runner)
	case !p.st.Runners[i].Started:
		return fmt.Errorf("force-remove-runner: runner %s is still starting; try again in a moment", req.Runner)
	}
	return nil
}

// forceRemoveRunner forwards the request to the runner as SignalForceRemove (a workflow cannot
// send another an update) and answers once the runner has it. The runner holds its place from
// now on: the pool starts no replacement until it has ended.
func (p *poolRun) forceRemoveRunner(ctx workflow.Context, req ForceRemoveRunnerRequest) (ForceRemoveRunnerResult, error) {
	if i := p.find(req.Runner); i >= 0 {
		p.st.Runners[i].Removing = true
	}
	p.changed = true
	p.logger.Info("Force-removing runner", "runner", req.Runner, "reason", req.Reason)
	err := workflow.SignalExternalWorkflow(ctx, RunnerWorkflowID(p.st.Spec.Name, req.Runner), "",
		SignalForceRemove, ForceRemoveRequest{Reason: req.Reason}).Get(ctx, nil)
	var gone *temporal.UnknownExternalWorkflowExecutionError
	if errors.As(err, &gone) {
		// It ended before the request reached it: the pool forgets it, as for any signal.
		p.forget(req.Runner, RunnerDone, "runner workflow not found when force-removed")
	}
	if err != nil {
		return ForceRemoveRunnerResult{}, fmt.Errorf("force-remove-runner: signal runner %s: %w", req.Runner, err)
	}
	return ForceRemoveRunnerResult{Runner: req.Runner}, nil
}

// status answers QueryStatus from the recorded state and the last decision.
func (p *poolRun) status() (PoolStatus, error) {
	now := workflow.Now(p.ctx)
	b, overrideOn, _ := effectiveBounds(p.st.Spec, p.st.Scale, now)
	outdated := 0
	for _, r := range p.st.Runners {
		if r.TemplateHash != p.st.TemplateHash {
			outdated++
		}
	}
	out := PoolStatus{
		Name: p.st.Spec.Name, Spec: p.st.Spec, TemplateHash: p.st.TemplateHash, Generation: p.st.Generation,
		Mode: p.st.Mode, ModeReason: p.st.ModeReason, Bounds: b, OverrideActive: overrideOn, Scale: p.st.Scale,
		Desired: p.plan.Desired, Why: p.plan.Why,
		Reservations: p.st.Reserved.Active(now), Reserved: p.st.Reserved.Reservations,
		RunnersByState: p.runnersByState(), Outdated: outdated, Runners: p.st.Runners,
		Orphans: p.st.Orphans, Decisions: p.st.Decisions, Finished: p.st.Finished, Totals: p.st.Totals,
		LastScaleOut: p.st.LastScaleOut, Listing: p.st.LastListing,
		Warm: p.st.Warm, WarmReady: p.warmReady(now), WarmWanted: p.warmWant(now),
		Blocked: p.blocks(), Clusters: runnersByCluster(p.st.Spec.Clusters, p.st.Runners),
		Predicted: p.prewarm.want, PredictedWhy: p.prewarm.why,
	}
	if p.st.Prewarm != nil {
		out.PrewarmLead = StartLatency(p.st.Prewarm.StartLatencies)
		out.Prewarmed = PrewarmedJobs(*p.st.Prewarm)
	}
	p.demand.status(&out)
	return out, nil
}
