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

// pool is one run of a pool workflow. Only st is carried across continue-as-new; the rest
// is this run's bookkeeping.
type pool struct {
	ctx    workflow.Context
	st     PoolState
	logger log.Logger
	// canAfter and iterations implement PoolInput.ContinueAsNewAfter, listenerCANAfter
	// PoolInput.ListenerContinueAsNewAfter.
	canAfter         int
	iterations       int
	listenerCANAfter int
	// changed is set by every handler and completion; the loop waits for it.
	changed bool
	// inflight counts child starts and signals to runners not yet acknowledged; listing is
	// true while a runner listing runs, checking while a runner workflow check runs,
	// jobChecking while reserved jobs are read at GitHub. Continue-as-new waits for all four.
	inflight    int
	listing     bool
	checking    bool
	jobChecking bool
	// warmBusy names the warm registrations with a call under way; warmWake is when the next
	// one is due for refresh.
	warmBusy []string
	warmWake time.Time
	// warmApart is changeWarmApart's gate (asked by tendWarm); warmSpentBusy is true while
	// spent warm Secrets are being removed.
	warmApart     bool
	warmSpentBusy bool
	// plan is the last decision, for QueryStatus.
	plan Plan
	// drainers receive what is left in the signal channels before continue-as-new.
	drainers []func() bool
	// lean is changeLeanRunners' gate, read once per run.
	lean bool
	// timer is the pending wake-up kept across iterations (changeLeanRunners).
	timer *poolTimer
	// demand is where the pool learns what its runners are needed for beyond its reservations
	// (pool_demand.go), chosen from the spec when the run starts.
	demand demandSource
}

func newPool(ctx workflow.Context, in PoolInput) (*pool, error) {
	p := &pool{ctx: ctx, canAfter: in.ContinueAsNewAfter, listenerCANAfter: in.ListenerContinueAsNewAfter}
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
func (p *pool) run() error {
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
		p.demand.tend(now)
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

// bounds are the min, max and minIdle in force at now.
func (p *pool) bounds(now time.Time) Bounds {
	b, _, _ := effectiveBounds(p.st.Spec, p.st.Scale, now)
	return b
}

func (p *pool) decide(now time.Time) Plan {
	elsewhere := 0
	if p.runnersKnowJobs() && workflow.GetVersion(p.ctx, changeEndJobWithRunner, workflow.DefaultVersion, 1) >= 1 {
		elsewhere = p.busyElsewhere(now)
	}
	return Decide(DecideInput{
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
	})
}

// runnersKnowJobs is true once a runner reported its job (runner code that reports jobs).
func (p *pool) runnersKnowJobs() bool {
	return slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool { return r.JobID != 0 })
}

// busyElsewhere counts busy runners whose job holds no active reservation here: another pool's
// job (its labels fit this pool's runners too), one whose queued event has not arrived yet, or
// one that outlived its reservation. With the reservations, every running job is counted
// exactly once — through its reservation or through its runner — so none of them is taken for
// free capacity and none is counted twice.
func (p *pool) busyElsewhere(now time.Time) int {
	n := 0
	for _, r := range p.st.Runners {
		if r.JobID != 0 && r.Busy && !r.JobDone && !r.State.Terminal() && !p.st.Reserved.Holds(r.JobID, now) {
			n++
		}
	}
	return n
}

// pruneReservations drops expired reservations (and restarts the clocks of those waiting
// beyond max) once one has expired, so the carried state does not grow.
func (p *pool) pruneReservations(now time.Time) {
	for _, r := range p.st.Reserved.Reservations {
		if !r.ExpiresAt.After(now) {
			p.st.Reserved, _ = ApplyReservationBatch(p.st.Reserved, ReservationBatch{}, p.reservationParams(now))
			return
		}
	}
}

func (p *pool) reservationParams(now time.Time) ReservationParams {
	params := ReservationParams{Now: now, Duration: p.st.Spec.ReservationDurationOrDefault(), MaxReplicas: p.bounds(now).Max}
	// Asked only when a reservation would expire with no runner online for it (by either
	// rule), so histories in which none did carry no marker.
	served, idle, serving := p.servedJobs(), p.idleRunners(), p.servingRunners(now)
	waitsOld := p.st.Reserved.WaitsForRunner(now, serving)
	if !waitsOld && !p.st.Reserved.WaitsUnserved(now, served, idle) {
		return params
	}
	if workflow.GetVersion(p.ctx, changeRenewUnserved, workflow.DefaultVersion, 1) >= 1 {
		params.RenewUnserved, params.ServedJobs, params.IdleRunners = true, served, idle
		return params
	}
	if waitsOld && workflow.GetVersion(p.ctx, changeReservationsWaitForRunners, workflow.DefaultVersion, 1) >= 1 {
		params.WaitForRunners = true
		params.ServingRunners = serving
	}
	return params
}

// servedJobs are the jobs that busy runners of the pool hold: their reservations are served
// (changeRenewUnserved).
func (p *pool) servedJobs() []int64 {
	var jobs []int64
	for _, r := range p.st.Runners {
		if r.Busy && r.JobID != 0 && !r.State.Terminal() {
			jobs = append(jobs, r.JobID)
		}
	}
	return jobs
}

// idleRunners counts the runners online and free to take a job: idle, not leaving. A busy
// runner whose job the pool does not know is not free, and is not counted for any
// reservation either (changeRenewUnserved).
func (p *pool) idleRunners() int {
	n := 0
	for _, r := range p.st.Runners {
		if r.State == RunnerIdle && !r.Draining && !r.Removing {
			n++
		}
	}
	return n
}

// servingRunners counts the runners online to serve this pool's reservations: idle ones not
// leaving, and busy ones whose job is not another pool's (busyElsewhere). The rule before
// changeRenewUnserved, kept for the histories that took it.
func (p *pool) servingRunners(now time.Time) int {
	n := 0
	for _, r := range p.st.Runners {
		if (r.State == RunnerIdle || r.State == RunnerBusy) && !r.Draining && !r.Removing {
			n++
		}
	}
	return max(n-p.busyElsewhere(now), 0)
}

// nextWake is the earliest time something is due without any signal: a held-back action, a
// reservation expiring, a scheduled override starting or ending, the next runner listing (or
// renewing the scope listing's short interval), a warm registration's refresh, what the source
// of demand has due.
func (p *pool) nextWake(now time.Time) time.Time {
	candidates := []time.Time{p.plan.WakeAt, p.warmWake}
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

// soonest is the earliest of the times that are set (not zero); zero when none is.
func soonest(times ...time.Time) time.Time {
	var next time.Time
	for _, t := range times {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// waitForChange blocks until a handler or completion records a change, or until wake.
func (p *pool) waitForChange(wake time.Time) error {
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
func (p *pool) waitWithKeptTimer(wake time.Time) error {
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

// poolTimer is the pool's one pending wake-up.
type poolTimer struct {
	at     time.Time
	fired  bool
	cancel workflow.CancelFunc
}

func (p *pool) startTimer(d time.Duration, at time.Time) *poolTimer {
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

func (p *pool) stopTimer() {
	if p.timer != nil {
		p.timer.cancel()
		p.timer = nil
	}
}

func (p *pool) shouldContinueAsNew() bool {
	return workflow.GetInfo(p.ctx).GetContinueAsNewSuggested() || (p.canAfter > 0 && p.iterations >= p.canAfter)
}

// continueAsNew waits for child starts, signals, the listing, the source of demand's work and
// update handlers in flight,
// takes the signals still queued, and hands the whole state to the next run.
func (p *pool) continueAsNew() error {
	err := workflow.Await(p.ctx, func() bool {
		return p.inflight == 0 && !p.listing && !p.checking && !p.jobChecking && !p.demand.busy() && workflow.AllHandlersFinished(p.ctx)
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
	return workflow.NewContinueAsNewError(p.ctx, PoolWorkflowType, PoolInput{State: &st, ContinueAsNewAfter: p.canAfter,
		ListenerContinueAsNewAfter: p.listenerCANAfter})
}

// syncSearchAttributes keeps the attributes the starter routes by (and the Temporal UI lists
// by) equal to the spec, upserting only when they differ.
func (p *pool) syncSearchAttributes() error {
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
func (p *pool) syncMemo() error {
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
func (p *pool) recordMetrics(now time.Time) {
	m := workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name})
	m.Gauge("runnerflow_pool_desired_runners").Update(float64(p.plan.Desired))
	m.Gauge("runnerflow_pool_reservations").Update(float64(p.st.Reserved.Active(now)))
	m.Gauge("runnerflow_pool_warm_registrations").Update(float64(p.warmReady(now)))
	p.recordClusterMetrics()
	p.recordScaleSetMetrics(m)
	p.recordWaiting(now)
	counts := p.runnersByState()
	for _, s := range []RunnerState{RunnerPending, RunnerRegistering, RunnerIdle, RunnerBusy, RunnerDraining} {
		m.WithTags(map[string]string{"state": string(s)}).Gauge("runnerflow_pool_runners").Update(float64(counts[s]))
	}
}

func (p *pool) runnersByState() map[RunnerState]int {
	counts := map[RunnerState]int{}
	for _, r := range p.st.Runners {
		counts[r.State]++
	}
	return counts
}
