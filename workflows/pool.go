package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PoolWorkflow keeps one pool's runners: it starts runner workflows to reach the desired count,
// drains idle ones to scale down or roll out a new template, and never takes a busy runner
// down. It runs for the pool's whole life, continuing as new when its history grows; runner
// workflows are children with parent-close policy ABANDON, so they outlive every run of it.
//
// Handlers only record (a runner's state report, an operator's scale, a new spec, a batch of
// reservations); the loop decides with the pure Decide and executes the plan. Versioning: this
// is the first version; later behaviour changes are gated with workflow.GetVersion, one
// commented line each.
func PoolWorkflow(ctx workflow.Context, in PoolInput) (PoolResult, error) {
	p, err := newPool(ctx, in)
	if err != nil {
		return PoolResult{}, err
	}
	return PoolResult{}, p.run()
}

func newPool(ctx workflow.Context, in PoolInput) (*poolRun, error) {
	p := &poolRun{ctx: ctx, canAfter: in.ContinueAsNewAfter, listenerCANAfter: in.ListenerContinueAsNewAfter}
	if in.State != nil {
		p.st = *in.State
	} else {
		spec := in.Spec.WithDefaults()
		errs := spec.Validate(field.NewPath("spec"))
		// The rules added later apply at a new pool's start only behind the change id: a pool
		// started before them replays its start as it ran (see ValidateNew).
		if workflow.GetVersion(ctx, changeNewSpecRules, workflow.DefaultVersion, 1) >= 1 {
			errs = spec.ValidateNew(field.NewPath("spec"))
		}
		if len(errs) > 0 {
			return nil, temporal.NewNonRetryableApplicationError("invalid pool spec: "+errs.ToAggregate().Error(), ErrInvalidSpec, nil)
		}
		p.st = PoolState{
			Spec:         spec,
			TemplateHash: spec.TemplateHash(),
			Generation:   Generation(workflow.GetInfo(ctx).FirstRunID),
			NextSeq:      1,
			Mode:         PoolActive,
		}
	}
	p.logger = log.With(workflow.GetLogger(ctx), "pool", p.st.Spec.Name)
	p.demand = p.chooseDemand()
	return p, nil
}

// run is the pool's life: set up handlers, then decide, act, and wait for the next change.
func (p *poolRun) run() error {
	p.lean = workflow.GetVersion(p.ctx, changeLeanRunners, workflow.DefaultVersion, 1) >= 1
	if err := p.registerHandlers(); err != nil {
		return err
	}
	p.receiveSignals()
	p.receiveScopeListing()
	p.receiveDemandNews()
	for {
		now := workflow.Now(p.ctx)
		p.changed = false
		if err := p.syncSearchAttributes(); err != nil {
			return err
		}
		if err := p.syncMemo(); err != nil {
			return err
		}
		p.pruneReservations(now)
		p.followSpec()
		p.demand.tend(now)
		p.tendPrewarm(now)
		p.plan = p.decide(now)
		p.execute(p.plan, now)
		p.askOverdueRegistrations(now)
		p.tendWarm(now)
		p.startListing(now)
		p.checkRunnerWorkflows(now)
		p.checkReservedJobs(now)
		p.recordMetrics(now)
		if p.shouldContinueAsNew() {
			return p.continueAsNew()
		}
		if err := p.waitForChange(p.nextWake(now)); err != nil {
			return err
		}
		p.iterations++
	}
}

func (p *poolRun) decide(now time.Time) Plan {
	elsewhere := 0
	if p.runnersKnowJobs() && workflow.GetVersion(p.ctx, changeEndJobWithRunner, workflow.DefaultVersion, 1) >= 1 {
		elsewhere = p.busyElsewhere(now)
	}
	plan := Decide(DecideInput{
		Demand:         p.demand.want(now),
		Now:            now,
		Bounds:         p.bounds(now),
		Reservations:   max(p.st.Reserved.Active(now)-heldUnattributed(p.st.UnattributedEnds, now), 0),
		BusyElsewhere:  elsewhere,
		Mode:           p.st.Mode,
		TemplateHash:   p.st.TemplateHash,
		Stateful:       p.st.Spec.Stateful(),
		Runners:        p.st.Runners,
		LastDesired:    p.st.LastDesired,
		LastScaleOut:   p.st.LastScaleOut,
		ScaleDownDelay: p.st.Spec.ScaleDownDelayOrDefault(),
		StartNotBefore: p.st.StartNotBefore,
		Predicted:      p.prewarm.want,
		Released:       p.released(),
	})
	if p.st.Prewarm != nil {
		p.st.Prewarm.Released = plan.Released
	}
	return plan
}

// nextWake is the earliest time something is due without any signal: a held-back action, a
// reservation expiring, a scheduled override starting or ending, the next runner listing (or
// renewing the scope listing's short interval), a warm registration's refresh, what the source
// of demand has due.
func (p *poolRun) nextWake(now time.Time) time.Time {
	candidates := []time.Time{p.plan.WakeAt, p.warmWake, p.prewarm.wake}
	for _, r := range p.st.Reserved.Reservations {
		if r.ExpiresAt.After(now) {
			candidates = append(candidates, r.ExpiresAt)
		}
	}
	_, _, overrideChange := effectiveBounds(p.st.Spec, p.st.Scale, now)
	candidates = append(candidates, overrideChange)

	if len(p.st.Runners) > 0 && !p.listing {
		candidates = append(candidates, p.st.NextListing)
	}
	if !p.checking && slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool { return r.Watched && r.Started }) {
		candidates = append(candidates, p.st.NextRunnerCheck)
	}
	candidates = append(candidates, p.nextRegistrationCheck(), p.listingDemandWake(), p.nextJobCheck(now), p.demand.wake(now))
	return soonest(candidates...)
}

// waitForChange blocks until a handler or completion records a change, or until wake.
func (p *poolRun) waitForChange(wake time.Time) error {
	if p.lean {
		return p.waitWithKeptTimer(wake)
	}
	if wake.IsZero() {
		return workflow.Await(p.ctx, func() bool { return p.changed })
	}
	// A wake time already due would spin the loop; one second is far below any interval here.
	d := max(wake.Sub(workflow.Now(p.ctx)), time.Second)
	_, err := workflow.AwaitWithTimeout(p.ctx, d, func() bool { return p.changed })
	return err
}

// waitWithKeptTimer is waitForChange since changeLeanRunners: one durable timer is kept across
// iterations and replaced only by an earlier wake, so a burst of runner reports (one loop
// iteration each) does not start and cancel a timer each. A kept timer that fires before the
// wake costs one iteration that decides nothing new.
func (p *poolRun) waitWithKeptTimer(wake time.Time) error {
	now := workflow.Now(p.ctx)
	if !wake.IsZero() {
		// A wake time already due would spin the loop; one second is far below any interval here.
		at := wake
		if at.Before(now.Add(time.Second)) {
			at = now.Add(time.Second)
		}
		if p.timer == nil || at.Before(p.timer.at) {
			p.stopTimer()
			p.timer = p.startTimer(at.Sub(now), at)
		}
	}
	t := p.timer
	err := workflow.Await(p.ctx, func() bool { return p.changed || (t != nil && t.fired) })
	if t != nil && t.fired {
		p.timer = nil
	}
	return err
}

func (p *poolRun) startTimer(d time.Duration, at time.Time) *poolTimer {
	ctx, cancel := workflow.WithCancel(p.ctx)
	t := &poolTimer{at: at, cancel: cancel}
	f := workflow.NewTimer(ctx, d)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if f.Get(ctx, nil) == nil {
			t.fired = true
		}
	})
	return t
}

func (p *poolRun) stopTimer() {
	if p.timer != nil {
		p.timer.cancel()
		p.timer = nil
	}
}

func (p *poolRun) shouldContinueAsNew() bool {
	return workflow.GetInfo(p.ctx).GetContinueAsNewSuggested() || (p.canAfter > 0 && p.iterations >= p.canAfter)
}

// continueAsNew waits for child starts, signals, the listing, the source of demand's work and
// update handlers in flight,
// takes the signals still queued, and hands the whole state to the next run.
func (p *poolRun) continueAsNew() error {
	err := workflow.Await(p.ctx, func() bool {
		return p.inflight == 0 && !p.listing && !p.checking && !p.jobChecking && !p.demand.busy() && len(p.prewarm.reading) == 0 &&
			workflow.AllHandlersFinished(p.ctx)
	})
	if err != nil {
		return err
	}
	for _, drain := range p.drainers {
		for drain() {
		}
	}
	st := p.st
	p.logger.Info("Pool continues as new", "runners", len(st.Runners), "iterations", p.iterations)
	return workflow.NewContinueAsNewError(onDecisionQueue(p.ctx, askPoolDecidesApart), PoolWorkflowType, PoolInput{State: &st, ContinueAsNewAfter: p.canAfter,
		ListenerContinueAsNewAfter: p.listenerCANAfter})
}

// syncSearchAttributes keeps the attributes the starter routes by (and the Temporal UI lists
// by) equal to the spec, upserting only when they differ.
func (p *poolRun) syncSearchAttributes() error {
	spec := p.st.Spec
	labels := spec.lowerLabels()
	have := workflow.GetTypedSearchAttributes(p.ctx)
	var updates []temporal.SearchAttributeUpdate
	for _, kv := range []struct {
		key   temporal.SearchAttributeKeyKeyword
		value string
	}{
		{SearchAttrPool, spec.Name}, {SearchAttrPoolScope, spec.Scope().String()}, {SearchAttrPoolGroup, spec.RunnerGroup},
	} {
		cur, ok := have.GetKeyword(kv.key)
		switch {
		case kv.value == "" && ok:
			updates = append(updates, kv.key.ValueUnset())
		case kv.value != "" && cur != kv.value:
			updates = append(updates, kv.key.ValueSet(kv.value))
		}
	}
	if cur, _ := have.GetKeywordList(SearchAttrPoolLabels); !slices.Equal(cur, labels) {
		updates = append(updates, SearchAttrPoolLabels.ValueSet(labels))
	}
	if len(updates) == 0 {
		return nil
	}
	return workflow.UpsertTypedSearchAttributes(p.ctx, updates...)
}

// changeEphemeralMemo gates the pool publishing MemoPoolEphemeral: the starter then sends a
// job's completed event on an ephemeral runner to the scale window alone, because the runner
// ends on its pod's exit and its final report ends its job's reservation (one signal a job
// fewer).
const changeEphemeralMemo = "ephemeral-in-memo"

// syncMemo keeps MemoPoolEphemeral equal to the spec, upserting only when it differs.
func (p *poolRun) syncMemo() error {
	if workflow.GetVersion(p.ctx, changeEphemeralMemo, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	want := p.st.Spec.IsEphemeral()
	var have bool
	if pl, ok := workflow.GetInfo(p.ctx).Memo.GetFields()[MemoPoolEphemeral]; ok &&
		converter.GetDefaultDataConverter().FromPayload(pl, &have) == nil && have == want {
		return nil
	}
	return workflow.UpsertMemo(p.ctx, map[string]any{MemoPoolEphemeral: want})
}

// recordMetrics publishes the pool's gauges through the replay-safe workflow metrics handler.
func (p *poolRun) recordMetrics(now time.Time) {
	m := workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name})
	m.Gauge("runnerflow_pool_desired_runners").Update(float64(p.plan.Desired))
	m.Gauge("runnerflow_pool_reservations").Update(float64(p.st.Reserved.Active(now)))
	m.Gauge("runnerflow_pool_warm_registrations").Update(float64(p.warmReady(now)))
	p.recordClusterMetrics()
	p.recordScaleSetMetrics(m)
	p.recordPrewarmMetrics(m)
	p.recordWaiting(now)
	counts := p.runnersByState()
	for _, s := range []RunnerState{RunnerPending, RunnerRegistering, RunnerIdle, RunnerBusy, RunnerDraining} {
		m.WithTags(map[string]string{"state": string(s)}).Gauge("runnerflow_pool_runners").Update(float64(counts[s]))
	}
}

// chooseDemand picks the run's source from the spec. A pool cannot become or stop being a
// scale set's (validateApply). A pool whose pull section was removed keeps the pull source
// while its state holds a pull to wind down: that source withdraws its shared demands, then
// wants nothing of its own. A webhook pool given a pull section takes it (followSpec).
func (p *poolRun) chooseDemand() demandSource {
	switch {
	case p.st.Spec.IsScaleSet():
		return newScaleSetDemand(p)
	case p.st.Spec.Pull != nil || p.st.Pull != nil:
		return newPullDemand(p)
	}
	return webhooksOnly{}
}

// followSpec takes, before the source tends, the pull source when an applied spec gave a
// webhook pool a pull section; once taken it serves the rest of the run (see chooseDemand).
// Until then the webhook source answers as the pull would: the pull has read nothing yet.
func (p *poolRun) followSpec() {
	if _, webhooks := p.demand.(webhooksOnly); webhooks && p.st.Spec.Pull != nil {
		p.demand = newPullDemand(p)
	}
}

// receiveDemandNews installs the receivers of the sources' signals in every pool, whatever its
// source: receiving issues no command, and a signal that is not the source's still wakes the
// loop, as it always did. Their order is the order they were installed in before the sources
// were apart (the scale set's, then the shared pull's).
func (p *poolRun) receiveDemandNews() {
	receive(p, SignalScaleSetMessage, func(s ScaleSetMessageSignal) { p.demand.hear(s) })
	receive(p, SignalScaleSetListenerEnded, func(s ScaleSetListenerEnded) { p.demand.hear(s) })
	receive(p, SignalScaleSetSessionOpened, func(s ScaleSetSessionOpened) { p.demand.hear(s) })
	receive(p, SignalRepoPull, func(s RepoPullSignal) { p.demand.hear(s) })
}
