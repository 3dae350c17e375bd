package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// poolHarness runs a pool workflow scenario in the test environment, across as many runs as
// continue-as-new makes (each run gets a fresh environment that starts where the last ended).
//
// Runner workflows are played by a test double: a fake workflow registered under
// RunnerWorkflowType whose start and drain signals the harness watches, plus a small runner
// simulation that reports state changes to the pool by signal — registering, idle, busy, done —
// as runner workflows do. Runners started by an earlier run are not children of the current
// one, so signals to them go through the environment's external-signal mock, as on a server.
// Messages to the pool are delivered as a server would deliver them (pool_delivery_test.go).
type poolHarness struct {
	t        *testing.T
	canAfter int
	start    time.Time

	env      *testsuite.TestWorkflowEnvironment
	segments int
	// canQueues are the task queues the runs continued as new on, in order.
	canQueues []string
	// runStarted is true once this segment's pool run has begun (its first workflow task,
	// which registers the query and update handlers, has run): see register.
	runStarted bool
	events     []*poolEvent
	// inTransit holds the signals sent to this run that it has not received yet, oldest first.
	inTransit []*poolEvent

	mu  sync.Mutex
	sim map[string]*simRunner
	// inputs records every runner workflow input, in start order.
	inputs []RunnerInput
	// claims counts EnsureSlotClaims calls per claim name.
	claims map[string]int
	// extraListed is listed by GitHub but unknown to the pool (an orphan).
	extraListed []RunnerListing
	// vanish makes the named runners' workflows end at once without reporting.
	vanish   map[string]bool
	stats    simStats
	outcomes map[string]updateOutcome
	seq      int
	// failRegistration makes new runners fail 10s after they start.
	failRegistration bool
	// warm plays GitHub and the Secrets for warm registrations (pool_warm_test.go).
	warm warmSim
	// prewarm plays GitHub's side of prewarming: the run graphs read (pool_prewarm_test.go).
	prewarm prewarmSim
	// failClaims makes EnsureSlotClaims fail for good.
	failClaims bool
	// forceRemoveTakes is how long a force-removed runner takes to end.
	forceRemoveTakes time.Duration
	// onSegment, if set, adds mocks to each run's environment.
	onSegment func()
	// metrics, if set, is every run's workflow metrics handler.
	metrics client.MetricsHandler
	// timers counts the durable timers the pool started, over all runs.
	timers int
	// silent runners start but never report; asked records the pool's check-registration
	// signals to any runner.
	silent map[string]bool
	// told records the listing statuses the runners were told, by signal or in a batch.
	told []RunnerStatusUpdate
	// statusBatches counts the SignalRunnerStatuses activities the pool ran.
	statusBatches int
	asked         []checkAsked
	// vanishedAt is when each vanished runner's workflow ended (at its start).
	vanishedAt map[string]time.Time
	// jobsAtGitHub is what GitHub says of jobs the pool reads (ReadJobs), by id; a job not
	// here is still queued. jobReads records each read's job ids.
	jobsAtGitHub map[int64]JobReading
	jobReads     [][]int64
	// jobsUnread are jobs GitHub refuses to this credential: ReadJobs leaves them out.
	jobsUnread map[int64]bool
}

// readJobs plays GitHub's answers to the pool's reads of its reserved jobs.
func (h *poolHarness) readJobs(_ context.Context, in ReadJobsInput) (ReadJobsOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out ReadJobsOutput
	var ids []int64
	for _, j := range in.Jobs {
		ids = append(ids, j.ID)
		if h.jobsUnread[j.ID] {
			continue
		}
		r, ok := h.jobsAtGitHub[j.ID]
		if !ok {
			r = JobReading{ID: j.ID, Status: JobQueued}
		}
		out.Jobs = append(out.Jobs, r)
	}
	h.jobReads = append(h.jobReads, ids)
	return out, nil
}

// checkAsked is one SignalCheckRegistration the pool sent.
type checkAsked struct {
	runner string
	at     time.Time
}

// silence makes the named runner's workflow start and then never report.
func (h *poolHarness) silence(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.silent == nil {
		h.silent = map[string]bool{}
	}
	h.silent[name] = true
}

// checksAsked returns the check-registration signals the pool sent, in order.
func (h *poolHarness) checksAsked() []checkAsked {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.asked)
}

type simStats struct {
	jobsCompleted int
	jobsCancelled int
	drained       int
}

type simRunner struct {
	in         RunnerInput
	state      RunnerState
	busy       bool
	drainAfter bool
	// job is the job a busy runner runs, when the scenario named it.
	job int64
}

// poolEvent is either a step (fn), fired when it runs, or one message to the pool (msg),
// fired only once the pool has seen it.
type poolEvent struct {
	at    time.Time
	fn    func()
	msg   *poolMessage
	fired bool
}

func newPoolHarness(t *testing.T, canAfter int) *poolHarness {
	return &poolHarness{
		t: t, canAfter: canAfter, start: time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC),
		sim: map[string]*simRunner{}, claims: map[string]int{}, vanish: map[string]bool{},
		warm: warmSim{registered: map[string]bool{}},
	}
}

// at schedules fn at an offset from the scenario's start.
func (h *poolHarness) at(offset time.Duration, fn func()) {
	h.schedule(h.start.Add(offset), fn)
}

// after schedules fn at an offset from the current workflow time.
func (h *poolHarness) after(d time.Duration, fn func()) {
	h.schedule(h.env.Now().Add(d), fn)
}

// schedule runs fn at (about) at.
func (h *poolHarness) schedule(at time.Time, fn func()) {
	h.scheduleEvent(&poolEvent{at: at, fn: fn})
}

// scheduleEvent gives the event its own instant — a microsecond after any other — so the
// order of events is the order they were scheduled in, and registers it with the current run.
func (h *poolHarness) scheduleEvent(ev *poolEvent) {
	h.mu.Lock()
	h.seq++
	ev.at = ev.at.Add(time.Duration(h.seq) * time.Microsecond)
	h.events = append(h.events, ev)
	h.mu.Unlock()
	if h.env != nil {
		h.register(ev)
	}
}

func (h *poolHarness) register(ev *poolEvent) {
	env := h.env
	if !ev.at.After(env.Now()) {
		// Due while the previous run was ending: keep it after now, still on its own instant.
		h.mu.Lock()
		h.seq++
		ev.at = env.Now().Add(time.Duration(h.seq) * time.Microsecond)
		h.mu.Unlock()
	}
	delay := ev.at.Sub(env.Now())
	env.RegisterDelayedCallback(func() {
		// A run that has continued as new leaves its events to the next run's environment.
		if ev.fired || env.IsWorkflowCompleted() {
			return
		}
		// A step due at a new run's first instant can be posted ahead of the run's start on a
		// loaded machine; the run's handlers do not exist yet, so it waits for the start.
		if !h.runStarted {
			h.register(ev)
			return
		}
		if ev.msg != nil {
			h.deliver(ev)
			return
		}
		ev.fired = true
		ev.fn()
	}, delay)
}

// run plays the scenario until end and returns the pool's status at end.
func (h *poolHarness) run(spec PoolSpec, end time.Duration) PoolStatus {
	var final PoolStatus
	// The end cancels the run through the environment's queue, like a message. A completion
	// queued ahead of the cancel (an activity's result, posted from its own goroutine) can make
	// the run continue as new first, and the environment drops the cancel with that run (a
	// server would cancel the next run: a cancel names the workflow, not the run). So the end
	// counts only once a run ends cancelled: a run that continued as new after it fired gets
	// it again, at the next run's first instant.
	endEv := &poolEvent{at: h.start.Add(end), fn: func() {
		final = h.status()
		h.env.CancelWorkflow()
	}}
	h.scheduleEvent(endEv)
	in := PoolInput{Spec: spec, ContinueAsNewAfter: h.canAfter}
	now := h.start
	for {
		h.segments++
		if h.segments > 5000 {
			h.t.Fatal("too many continue-as-new runs")
		}
		err := h.segment(in, now)
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			if !temporal.IsCanceledError(err) {
				h.t.Fatalf("pool workflow ended with %v, want cancelled at the end of the scenario", err)
			}
			return final
		}
		h.canQueues = append(h.canQueues, can.TaskQueueName)
		var next PoolInput
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			h.t.Fatalf("decode continue-as-new input: %v", err)
		}
		if next.State == nil {
			h.t.Fatal("continue-as-new carried no state")
		}
		in, now = next, h.env.Now()
		endEv.fired = false // its cancel, if it was posted, died with that run
	}
}

func (h *poolHarness) segment(in PoolInput, now time.Time) error {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	if h.metrics != nil {
		suite.SetMetricsHandler(h.metrics)
	}
	env := suite.NewTestWorkflowEnvironment()
	h.env = env
	// Signals sent to the last run and never received are sent again (their events not fired).
	h.inTransit = nil
	h.runStarted = false
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&deliveryWitness{h: h}}})
	env.SetStartTime(now)
	env.SetDetachedChildWait(false)
	env.SetTestTimeout(time.Minute)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: PoolWorkflowID("linux")})
	env.RegisterWorkflowWithOptions(PoolWorkflow, workflow.RegisterOptions{Name: PoolWorkflowType})
	env.RegisterWorkflowWithOptions(h.fakeRunner, workflow.RegisterOptions{Name: RunnerWorkflowType})
	env.RegisterActivityWithOptions(h.listRunners, activity.RegisterOptions{Name: ActivityListRunners})
	env.RegisterActivityWithOptions(h.ensureClaims, activity.RegisterOptions{Name: ActivityEnsureSlotClaims})
	env.RegisterActivityWithOptions(h.registerRunner, activity.RegisterOptions{Name: ActivityRegisterRunner})
	env.RegisterActivityWithOptions(h.removeRunner, activity.RegisterOptions{Name: ActivityRemoveRunner})
	env.RegisterActivityWithOptions(h.deleteSecret, activity.RegisterOptions{Name: ActivityDeleteRunnerSecret})
	env.RegisterActivityWithOptions(h.deleteWarmSecrets, activity.RegisterOptions{Name: ActivityDeleteWarmSecrets})
	env.RegisterActivityWithOptions(h.startRunnerWorkflows, activity.RegisterOptions{Name: ActivityStartRunnerWorkflows})
	h.playScopeListing(env)
	env.RegisterActivityWithOptions(h.listEndedRunners, activity.RegisterOptions{Name: ActivityListEndedRunners})
	env.RegisterActivityWithOptions(h.signalRunnerStatuses, activity.RegisterOptions{Name: ActivitySignalRunnerStatuses})
	env.RegisterActivityWithOptions(h.readJobs, activity.RegisterOptions{Name: ActivityReadJobs})
	env.SetOnChildWorkflowStartedListener(h.childStarted)
	env.SetOnTimerScheduledListener(func(string, time.Duration) { h.timers++ })
	if h.onSegment != nil {
		h.onSegment()
	}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(h.externalSignal)
	h.mu.Lock()
	pending := slices.DeleteFunc(slices.Clone(h.events), func(ev *poolEvent) bool { return ev.fired })
	h.mu.Unlock()
	for _, ev := range pending {
		h.register(ev)
	}
	env.ExecuteWorkflow(PoolWorkflowType, in)
	return env.GetWorkflowError()
}

// fakeRunner is the runner workflow's test double. It never ends by itself (runners end by
// their reports); its start (childStarted) and drain signals (deliveryWitness) are played by
// the simulation as the environment delivers them, because the pool may continue as new
// before this body runs — a real runner workflow runs on regardless.
func (h *poolHarness) fakeRunner(ctx workflow.Context, in RunnerInput) (RunnerResult, error) {
	h.mu.Lock()
	gone := h.vanish[in.Name]
	h.mu.Unlock()
	if gone {
		return RunnerResult{Name: in.Name}, nil
	}
	return RunnerResult{}, workflow.Await(ctx, func() bool { return false })
}

// childStarted registers a runner with the simulation as its workflow starts. It hooks the
// environment's start notification rather than the fake's body, because the pool may continue
// as new as soon as the start is acknowledged, before the body runs — a real runner workflow
// runs on regardless.
func (h *poolHarness) childStarted(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
	if info.WorkflowType.Name != RunnerWorkflowType {
		return
	}
	var in RunnerInput
	if err := args.Get(&in); err != nil {
		h.t.Errorf("decode runner input: %v", err)
		return
	}
	h.mu.Lock()
	h.inputs = append(h.inputs, in)
	gone := h.vanish[in.Name]
	h.mu.Unlock()
	if !gone {
		h.started(in)
	}
}

// startRunnerWorkflows plays the StartRunnerWorkflows activity: every runner of the batch
// starts (a vanishing one ends at once, never reporting), as childStarted plays a child's start.
func (h *poolHarness) startRunnerWorkflows(_ context.Context, in StartRunnerWorkflowsInput) (StartRunnerWorkflowsOutput, error) {
	for _, r := range in.Runners {
		h.mu.Lock()
		h.inputs = append(h.inputs, r)
		gone := h.vanish[r.Name]
		if gone {
			if h.vanishedAt == nil {
				h.vanishedAt = map[string]time.Time{}
			}
			h.vanishedAt[r.Name] = h.env.Now()
		}
		h.mu.Unlock()
		if !gone {
			h.started(r)
		}
	}
	return StartRunnerWorkflowsOutput{}, nil
}

// listEndedRunners plays Temporal's visibility: the vanished runners were terminated when
// they started.
func (h *poolHarness) listEndedRunners(_ context.Context, in ListEndedRunnersInput) (ListEndedRunnersOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out ListEndedRunnersOutput
	for name, at := range h.vanishedAt {
		if !at.Before(in.Since) {
			out.Ended = append(out.Ended, EndedRunner{Name: name, Status: "Terminated", ClosedAt: at})
		}
	}
	slices.SortFunc(out.Ended, func(a, b EndedRunner) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (h *poolHarness) externalSignal(namespace, workflowID, runID, signal string, arg any) error {
	name := runnerNameOf(workflowID)
	h.mu.Lock()
	r, ok := h.sim[name]
	gone := !ok || r.state.Terminal()
	h.mu.Unlock()
	if gone {
		return &temporal.UnknownExternalWorkflowExecutionError{}
	}
	switch signal {
	case SignalRunnerStatus:
		h.mu.Lock()
		h.told = append(h.told, RunnerStatusUpdate{Runner: name, Status: arg.(RunnerStatusSignal)})
		h.mu.Unlock()
	case SignalDrain:
		h.drain(name)
	case SignalForceRemove:
		h.forceRemove(name, arg.(ForceRemoveRequest))
	case SignalCheckRegistration:
		h.mu.Lock()
		h.asked = append(h.asked, checkAsked{runner: name, at: h.env.Now()})
		h.mu.Unlock()
	}
	return nil
}

// signalRunnerStatuses plays SignalRunnerStatuses: each status goes to its runner as the
// pool's own signal would (externalSignal), and the runners whose workflow is gone are named.
func (h *poolHarness) signalRunnerStatuses(_ context.Context, in SignalRunnerStatusesInput) (SignalRunnerStatusesOutput, error) {
	var out SignalRunnerStatusesOutput
	h.mu.Lock()
	h.statusBatches++
	h.mu.Unlock()
	for _, u := range in.Updates {
		if err := h.externalSignal("", RunnerWorkflowID(in.Pool, u.Runner), "", SignalRunnerStatus, u.Status); err != nil {
			out.Gone = append(out.Gone, u.Runner)
		}
	}
	return out, nil
}

func (h *poolHarness) started(in RunnerInput) {
	h.mu.Lock()
	h.sim[in.Name] = &simRunner{in: in, state: RunnerPending}
	delete(h.warm.registered, in.Name) // a taken warm registration is the runner's now
	fail, silent := h.failRegistration, h.silent[in.Name]
	h.mu.Unlock()
	if silent {
		return
	}
	if fail {
		h.after(10*time.Second, func() { h.end(in.Name, RunnerFailed, "registration failed") })
		return
	}
	h.after(time.Second, func() { h.advance(in.Name, RunnerPending, RunnerRegistering) })
	h.after(20*time.Second, func() { h.advance(in.Name, RunnerRegistering, RunnerIdle) })
}

// advance moves a runner from one state to the next and reports it, unless something else
// (a drain) moved it first.
func (h *poolHarness) advance(name string, from, to RunnerState) {
	h.mu.Lock()
	r := h.sim[name]
	if r.state != from {
		h.mu.Unlock()
		return
	}
	r.state = to
	h.mu.Unlock()
	h.report(name, to, "")
}

// runnerNameOf is the runner name at the end of a runner workflow id.
func runnerNameOf(workflowID string) string {
	return workflowID[strings.LastIndex(workflowID, "/")+1:]
}

// report signals a runner's state to the pool, as the runner workflow does (a busy runner
// names its job when it knows it).
func (h *poolHarness) report(name string, state RunnerState, reason string) {
	h.mu.Lock()
	r := h.sim[name]
	rep := RunnerStateReport{Runner: name, State: state, TemplateHash: r.in.Spec.TemplateHash, Slot: r.in.Slot, Reason: reason}
	if state == RunnerBusy {
		rep.JobID = r.job
	}
	h.mu.Unlock()
	h.signal(SignalRunnerState, rep)
}

// startJobsWithIDs puts the jobs on idle runners (by name), one each, and returns the runners.
func (h *poolHarness) startJobsWithIDs(jobs ...int64) []string {
	h.mu.Lock()
	var idle []string
	for name, r := range h.sim {
		if r.state == RunnerIdle {
			idle = append(idle, name)
		}
	}
	slices.Sort(idle)
	idle = idle[:min(len(jobs), len(idle))]
	for i, name := range idle {
		h.sim[name].state, h.sim[name].busy, h.sim[name].job = RunnerBusy, true, jobs[i]
	}
	h.mu.Unlock()
	for _, name := range idle {
		h.report(name, RunnerBusy, "")
	}
	return idle
}

// drain plays a runner's drain: a busy runner finishes its job first (never cancelled).
func (h *poolHarness) drain(name string) {
	h.mu.Lock()
	r := h.sim[name]
	if r.state.Terminal() || r.state == RunnerDraining || r.drainAfter {
		h.mu.Unlock()
		return
	}
	h.stats.drained++
	if r.busy {
		r.drainAfter = true
		h.mu.Unlock()
		return
	}
	r.state = RunnerDraining
	h.mu.Unlock()
	h.after(time.Second, func() { h.report(name, RunnerDraining, "drain") })
	h.after(3*time.Second, func() { h.end(name, RunnerDone, "drained") })
}

// forceRemove plays a runner's force-remove: it reports draining (removing) at once, whether
// busy or not, and ends after forceRemoveTakes (its pod, registration and Secret going).
func (h *poolHarness) forceRemove(name string, req ForceRemoveRequest) {
	h.mu.Lock()
	r := h.sim[name]
	r.state, r.busy = RunnerDraining, false
	rep := RunnerStateReport{Runner: name, State: RunnerDraining, TemplateHash: r.in.Spec.TemplateHash,
		Slot: r.in.Slot, Reason: "force-removed: " + req.Reason, Removing: true}
	took := h.forceRemoveTakes
	h.mu.Unlock()
	h.after(time.Second, func() { h.signal(SignalRunnerState, rep) })
	h.after(took, func() { h.end(name, RunnerDone, rep.Reason) })
}

func (h *poolHarness) end(name string, state RunnerState, reason string) {
	h.mu.Lock()
	h.sim[name].state = state
	h.mu.Unlock()
	h.report(name, state, reason)
}

// startJobs puts jobs on the first n idle runners (by name) and returns them.
func (h *poolHarness) startJobs(n int) []string {
	h.mu.Lock()
	var idle []string
	for name, r := range h.sim {
		if r.state == RunnerIdle {
			idle = append(idle, name)
		}
	}
	slices.Sort(idle)
	idle = idle[:min(n, len(idle))]
	for _, name := range idle {
		h.sim[name].state, h.sim[name].busy = RunnerBusy, true
	}
	h.mu.Unlock()
	for _, name := range idle {
		h.report(name, RunnerBusy, "")
	}
	return idle
}

// finishJobs completes the jobs of the named runners: an ephemeral runner (or one asked to
// drain) ends, a persistent one is idle again.
//
// Runners that leave end a second apart, in the order named: two ends at one instant would
// reach the pool in whichever order the environment's goroutines run, and a stateful pool
// then fills the freed slots in a different order from run to run.
func (h *poolHarness) finishJobs(names []string) {
	for i, name := range names {
		h.mu.Lock()
		r := h.sim[name]
		if !r.busy {
			h.mu.Unlock()
			continue
		}
		r.busy = false
		h.stats.jobsCompleted++
		ends := r.in.Spec.Ephemeral || r.drainAfter
		h.mu.Unlock()
		if ends {
			// As a runner workflow does: draining while it deletes its pod, then done.
			h.mu.Lock()
			r.state = RunnerDraining
			h.mu.Unlock()
			h.report(name, RunnerDraining, "job completed")
			h.after(30*time.Second+time.Duration(i)*time.Second, func() { h.end(name, RunnerDone, "job completed") })
			continue
		}
		h.end(name, RunnerIdle, "")
	}
}

func (h *poolHarness) listRunners(_ context.Context, in ListRunnersInput) (ListRunnersResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out ListRunnersResult
	for name, r := range h.sim {
		if strings.HasPrefix(name, in.NamePrefix) && (r.state == RunnerIdle || r.state == RunnerBusy || r.state == RunnerDraining) {
			out.Runners = append(out.Runners, RunnerListing{Name: name, Online: true, Busy: r.busy})
		}
	}
	out.Runners = append(out.Runners, h.extraListed...)
	for name := range h.warm.registered {
		if strings.HasPrefix(name, in.NamePrefix) {
			out.Runners = append(out.Runners, RunnerListing{Name: name}) // offline until a runner takes it
		}
	}
	slices.SortFunc(out.Runners, func(a, b RunnerListing) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// addOrphan makes GitHub list a runner the pool does not know. It takes the lock because the
// listing activity reads the list on its own goroutine, possibly while this event runs.
func (h *poolHarness) addOrphan(l RunnerListing) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.extraListed = append(h.extraListed, l)
}

func (h *poolHarness) ensureClaims(_ context.Context, in EnsureSlotClaimsInput) (EnsureSlotClaimsResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failClaims {
		return EnsureSlotClaimsResult{}, temporal.NewNonRetryableApplicationError("claims refused", ErrForbidden, nil)
	}
	var out EnsureSlotClaimsResult
	for _, c := range in.Claims {
		if h.claims[c.Name] == 0 {
			out.Created = append(out.Created, c.Name)
		}
		h.claims[c.Name]++
	}
	return out, nil
}

func (h *poolHarness) status() PoolStatus {
	v, err := h.env.QueryWorkflow(QueryStatus)
	if err != nil {
		h.t.Fatalf("query status: %v", err)
	}
	var st PoolStatus
	if err := v.Get(&st); err != nil {
		h.t.Fatalf("decode status: %v", err)
	}
	return st
}

// signal sends a signal to the pool.
func (h *poolHarness) signal(name string, arg any) {
	h.send(poolMessage{signal: name, arg: arg})
}

// update sends an update; its outcome is recorded under label when the pool answers.
func (h *poolHarness) update(label, name string, arg any) {
	h.send(poolMessage{update: name, label: label, arg: arg})
}

// updateOutcome is an update's answer; the test environment hands back the handler's value.
type updateOutcome struct {
	rejected error
	failed   error
	result   any
}

func (h *poolHarness) setOutcome(label string, o updateOutcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.outcomes == nil {
		h.outcomes = map[string]updateOutcome{}
	}
	h.outcomes[label] = o
}

func (h *poolHarness) outcome(label string) (updateOutcome, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.outcomes[label]
	return o, ok
}

// fingerprint is what must be equal however often the pool continued as new.
func fingerprint(st PoolStatus, stats simStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode=%s desired=%d bounds=%+v reservations=%d totals=%+v outdated=%d\n",
		st.Mode, st.Desired, st.Bounds, st.Reservations, st.Totals, st.Outdated)
	for _, r := range st.Runners {
		fmt.Fprintf(&b, "runner %s hash=%s state=%s busy=%v draining=%v slot=%d\n", r.Name, r.TemplateHash, r.State, r.Busy, r.Draining, r.Slot)
	}
	finished := []string{}
	for _, f := range st.Finished {
		finished = append(finished, f.Name+"="+string(f.State))
	}
	slices.Sort(finished)
	fmt.Fprintf(&b, "finished %v\norphans %d\nsim %+v\n", finished, len(st.Orphans), stats)
	for _, w := range st.Warm {
		fmt.Fprintf(&b, "warm %s seq=%d id=%d retiring=%q\n", w.Name, w.Seq, w.RunnerID, w.Retiring)
	}
	return b.String()
}

func countState(st PoolStatus, state RunnerState, hash string) int {
	n := 0
	for _, r := range st.Runners {
		if r.State == state && (hash == "" || r.TemplateHash == hash) {
			n++
		}
	}
	return n
}
