package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// Versioning. A runner workflow lives as long as its runner (a persistent runner: weeks), so
// workers replay histories written by older code. Every change to the commands it issues
// (which activities, timers, signals, in which order) is gated with workflow.GetVersion and
// listed in Changes (changes.go), where the changes that need no id are written down too.

// RunnerWorkflow is one runner's whole life: register → run → unregister → delete. It is
// registered as RunnerWorkflowType; its id is RunnerWorkflowID(pool, name). It fails (visibly,
// with error type ErrRunnerFailed) only when the runner never came online (since
// changeNeverOnlineEnds, after its one registration; before, within MaxRegistrationAttempts)
// or an activity failed for good; otherwise it returns the runner's end.
func RunnerWorkflow(ctx workflow.Context, in RunnerInput) (RunnerResult, error) {
	r := newRunner(ctx, in)
	if err := in.validate(); err != nil {
		return r.fail(ctx, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidSpec, nil))
	}
	if err := r.setupHandlers(ctx); err != nil {
		return RunnerResult{}, err
	}
	return r.run(ctx)
}

// runner is one runner workflow's state. Signal and update handlers only record into obs; the
// loop in watch decides and acts.
type runner struct {
	in     RunnerInput
	mode   RegistrationMode
	limits watchLimits
	log    log.Logger

	// lean is changeLeanLifecycle's gate, read once per run (see the list at the top).
	lean bool
	// upserted is the RunnerState last written to the search attributes.
	upserted RunnerState

	attempt    int
	registered bool
	reg        RegisterRunnerOutput
	podUID     string
	state      RunnerState
	reason     string
	obs        RunnerObservations
	// stepWait is the credential step that failed and waits to be taken up again, for the
	// status query (`starter why`); the runner's decisions never read it.
	stepWait *StepWait
	// reportedJob is the job last reported to the pool with the busy state.
	reportedJob int64

	sources []signalSource
	wake    workflow.Channel
	timer   *deadlineTimer
	// cleaningUp is set while unregistering and deleting, so a failure there is not retried by
	// the failure path's own cleanup.
	cleaningUp bool
}

func newRunner(ctx workflow.Context, in RunnerInput) *runner {
	r := &runner{
		in:   in,
		mode: in.Spec.mode(),
		limits: watchLimits{
			registrationTimeout: in.Spec.RegistrationTimeout,
			ephemeral:           in.Spec.Ephemeral,
			poolWatches:         in.PoolWatches && in.Pool != "",
		},
		log:  log.With(workflow.GetLogger(ctx), "pool", in.Pool, "runner", in.Name),
		wake: workflow.NewBufferedChannel(ctx, 1),
	}
	if r.limits.registrationTimeout <= 0 {
		r.limits.registrationTimeout = DefaultRegistrationTimeout
	}
	if in.Warm != nil {
		// A warm registration is the runner's from its start: whatever ends it removes it.
		r.registered, r.reg = true, *in.Warm
	}
	if res := in.Resume; res != nil {
		r.attempt, r.registered, r.podUID = res.Attempt, res.Registered, res.PodUID
		r.reg = RegisterRunnerOutput{RunnerID: res.RunnerID, SecretName: res.SecretName, SecretUID: res.SecretUID, RunnerURL: res.RunnerURL}
		r.state, r.obs, r.reportedJob = res.State, res.Observed, res.ReportedJob
		r.in.Resume = nil
	}
	r.sources = r.signalSources(ctx)
	return r
}

// run reads as the runner's lifecycle: register and start a pod, watch it, and either finish
// (unregister, delete) or, if the runner never came online, tear down and end for its pool to
// decide (histories before changeNeverOnlineEnds tear down and try again).
func (r *runner) run(ctx workflow.Context) (RunnerResult, error) {
	r.lean = workflow.GetVersion(ctx, changeLeanLifecycle, workflow.DefaultVersion, 1) >= 1
	r.limits.endWithJob = r.lean && r.limits.ephemeral
	if r.lean {
		r.upserted = startedState(ctx)
	}
	switch {
	case r.state == "":
		r.setState(ctx, RunnerPending, "")
	case !r.lean || r.upserted == "":
		r.upsertSearchAttributes(ctx) // a new run after continue-as-new: make sure they are set
	}
	for {
		if r.podUID == "" {
			if r.drainSignals(); r.obs.Force != nil {
				return r.forceRemove(ctx, r.obs.forceEnding())
			}
			if r.obs.Drain != nil {
				return r.finish(ctx, ending{reason: withDetail("drained before registration", r.obs.Drain.Reason)})
			}
			if err := r.registerAndStart(ctx); err != nil {
				return r.fail(ctx, err)
			}
		}
		end := r.watch(ctx)
		switch end.kind {
		case endContinueAsNew:
			return RunnerResult{}, r.continueAsNew(ctx)
		case endCancelled:
			return r.cancelled(ctx)
		case endFinish:
			if end.force {
				return r.forceRemove(ctx, end)
			}
			return r.finish(ctx, end)
		case endClusterLost:
			return r.leaveLostCluster(ctx, end)
		case endFailed:
			return r.fail(ctx, end.failure)
		}
		if workflow.GetVersion(ctx, changeNeverOnlineEnds, workflow.DefaultVersion, 1) >= 1 {
			return r.neverOnline(ctx, end)
		}
		r.log.Warn("Runner did not come online; registering again", "attempt", r.attempt, "reason", end.reason)
		if err := r.cleanup(ctx, end); err != nil {
			return r.fail(ctx, err)
		}
		if r.attempt >= MaxRegistrationAttempts {
			return r.fail(ctx, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"runner did not come online after %d attempts (%s)", r.attempt, end.reason), ErrRunnerFailed, nil))
		}
	}
}

// neverOnline ends a runner that never came online (its pod never started, or its runner never
// connected): it removes what it made — the registration unless GitHub has none, the Secret
// and with it the pod — and fails visibly, reporting failed to its pool with a reason that
// says so. It registers no other runner: whether another is needed is its pool's decision
// (Decide starts what desired needs, after the pool's failure backoff).
func (r *runner) neverOnline(ctx workflow.Context, end ending) (RunnerResult, error) {
	r.log.Warn("Runner never came online; ending it for its pool to decide", "attempt", r.attempt, "reason", end.reason)
	end.kind = endNeverOnline
	r.obs.setBusy(false)
	if err := r.cleanup(ctx, end); err != nil {
		return r.fail(ctx, err)
	}
	return r.fail(ctx, temporal.NewNonRetryableApplicationError(NeverOnlineReason+": "+end.reason, ErrRunnerFailed, nil))
}

// NeverOnlineReason begins the reason of a runner that ended because it never came online
// (changeNeverOnlineEnds): its final report to the pool is failed with this reason.
const NeverOnlineReason = "never came online"

// registerAndStart registers the runner at GitHub (credential into the Secret), creates its
// pod and makes the pod own the Secret. The first attempt of a runner started with a warm
// registration skips the registration: the pod comes first on a burst's path.
func (r *runner) registerAndStart(ctx workflow.Context) error {
	r.attempt++
	warm := r.attempt == 1 && r.in.Warm != nil
	if !warm {
		r.reg = RegisterRunnerOutput{}
	}
	r.obs = RunnerObservations{Drain: r.obs.Drain, Force: r.obs.Force, JobsRun: r.obs.JobsRun, RecentJobs: r.obs.RecentJobs}
	r.setState(ctx, RunnerRegistering, "")
	spec := r.in.Spec
	podIn := CreateRunnerPodInput{
		Cluster: r.in.Cluster, Pool: r.in.Pool, Name: r.in.Name, WorkflowID: r.workflowID(), Namespace: spec.Namespace,
		Template: spec.Template, TemplateHash: spec.TemplateHash, Mode: r.mode, SlotVolumes: r.in.SlotVolumes,
		Labels: spec.Labels, RunnerGroup: spec.RunnerGroup, Ephemeral: spec.Ephemeral, WorkFolder: spec.WorkFolder,
	}
	apartCopy := warm && r.reg.apart(spec.Namespace) &&
		workflow.GetVersion(ctx, changeWarmApartCopy, workflow.DefaultVersion, 1) >= 1
	if r.mode == RegistrationJIT && (!warm || apartCopy) &&
		workflow.GetVersion(ctx, changeSecretAfterScheduling, workflow.DefaultVersion, 1) >= 1 {
		return r.startPodFirst(ctx, podIn)
	}
	var pod *CreateRunnerPodOutput
	if !warm {
		regIn := RegisterRunnerInput{
			Cluster: r.in.Cluster, Pool: r.in.Pool, Name: r.in.Name, WorkflowID: r.workflowID(), Namespace: spec.Namespace,
			Scope: spec.Scope, Labels: spec.Labels, RunnerGroup: spec.RunnerGroup, Mode: r.mode,
			WorkFolder: spec.WorkFolder,
		}
		if r.lean {
			regIn.Pod = &podIn // created by the registration, owned by its Secret
		}
		reg, err := r.register(ctx, regIn)
		if err != nil {
			r.keepRegistrationOf(err)
			return fmt.Errorf("register runner: %w", err)
		}
		r.registered, r.reg, pod = true, reg, reg.Pod
	}
	if apartCopy {
		podIn.SecretName = r.in.Name
		out, err := startWarmRunner(ctx, StartWarmRunnerInput{
			Pod: podIn, Warm: SecretRef{Cluster: r.in.Cluster, Namespace: r.reg.SecretNamespace, Name: r.reg.SecretName},
		})
		if err != nil {
			return fmt.Errorf("start runner from its warm registration: %w", err)
		}
		// From here on the runner's Secret is its own copy; the warm one is its pool's.
		r.reg.SecretName, r.reg.SecretUID, r.reg.SecretNamespace = out.SecretName, out.SecretUID, ""
		pod = &out.Pod
	}
	reg := r.reg
	if pod == nil {
		podIn.SecretName, podIn.SecretUID, podIn.RunnerURL = reg.SecretName, r.podOwnerUID(), reg.RunnerURL
		created, err := createRunnerPod(ctx, podIn)
		if err != nil {
			return fmt.Errorf("create runner pod: %w", err)
		}
		pod = &created
	}
	r.notePod(ctx, *pod)
	if r.secretOwnsPod() {
		return nil // the pod was created owned by its Secret
	}
	if _, err := setSecretOwner(ctx, SetSecretOwnerInput{
		Cluster: r.in.Cluster, Namespace: spec.Namespace, SecretName: reg.SecretName, PodName: r.in.Name, PodUID: pod.UID,
	}); err != nil {
		return fmt.Errorf("set runner secret owner: %w", err)
	}
	return nil
}

// notePod records this attempt's pod: the registration timeout and the pod check count from
// its creation.
func (r *runner) notePod(ctx workflow.Context, pod CreateRunnerPodOutput) {
	r.podUID = pod.UID
	now := workflow.Now(ctx)
	r.obs.AttemptStart, r.obs.LastPodCheck = now, now
	r.obs.PodCreatedAt = pod.CreatedAt
	if r.obs.PodCreatedAt.IsZero() {
		r.obs.PodCreatedAt = now
	}
}

// keepRegistrationOf takes the registration a failed RegisterRunner made before its pod
// failed for good (the error's details carry it), so the failure's cleanup removes it.
func (r *runner) keepRegistrationOf(err error) {
	var appErr *temporal.ApplicationError
	var reg RegisterRunnerOutput
	if r.lean && errors.As(err, &appErr) && appErr.HasDetails() && appErr.Details(&reg) == nil && reg.SecretName != "" {
		r.registered, r.reg = true, reg
	}
}

// secretOwnsPod is true when this attempt's pod is (or is to be) created owned by the runner's
// Secret: deleting the Secret then removes the pod too.
func (r *runner) secretOwnsPod() bool {
	return r.lean && r.reg.SecretUID != "" && r.obs.Credential == ""
}

// finish removes a runner whose work is over: unregister (retried while GitHub says busy, so
// a busy runner is never removed), delete the pod, delete the Secret.
func (r *runner) finish(ctx workflow.Context, end ending) (RunnerResult, error) {
	// Every way a runner's work ends leaves it running no job (its process exited, its job is
	// done, or it was drained idle), whatever the last job signal said.
	r.obs.setBusy(false)
	r.setState(ctx, RunnerDraining, end.reason)
	if err := r.cleanup(ctx, end); err != nil {
		return r.fail(ctx, err)
	}
	// What arrived during the cleanup goes into the final report: a drained runner may have
	// run a job meanwhile (its pod was starting when the drain came), and its pool ends that
	// job's reservation only if the report names it. Nothing left to act on.
	r.drainSignals()
	r.setState(ctx, RunnerDone, end.reason)
	return r.result(), nil
}

// cleanup undoes what the current attempt created, in the order that never kills a busy runner.
// A pod its Secret owns goes with the Secret (the garbage collector deletes it), except before
// registering again: the next attempt's pod takes the same name, so the old one is deleted first.
func (r *runner) cleanup(ctx workflow.Context, end ending) error {
	r.cleaningUp = true
	defer func() { r.cleaningUp = false }()
	if r.registered && !end.githubDone {
		if err := r.unregister(ctx, false); err != nil {
			return fmt.Errorf("remove runner from GitHub: %w", err)
		}
	}
	r.registered = false
	if r.secretOwnsPod() && end.kind != endReregister {
		r.podUID = ""
	}
	if r.podUID != "" {
		if _, err := deleteRunnerPod(ctx, r.podRef()); err != nil {
			return fmt.Errorf("delete runner pod: %w", err)
		}
		r.podUID = ""
	}
	if r.reg.SecretName != "" {
		if _, err := deleteRunnerSecret(ctx, r.secretRef()); err != nil {
			return fmt.Errorf("delete runner secret: %w", err)
		}
		r.reg.SecretName, r.reg.SecretUID = "", ""
	}
	return nil
}

// podOwnerUID is the Secret UID the pod is created owned by; empty keeps the old order (the
// Secret made the pod's dependent by a patch).
func (r *runner) podOwnerUID() string {
	if r.lean {
		return r.reg.SecretUID
	}
	return ""
}

// fail ends the workflow visibly: it cleans up what it can (unless the cleanup is what
// failed), reports failed to the pool and returns a non-retryable error.
func (r *runner) fail(ctx workflow.Context, cause error) (RunnerResult, error) {
	if temporal.IsCanceledError(cause) {
		return r.cancelled(ctx)
	}
	reason := cause.Error()
	if !r.cleaningUp {
		if err := r.cleanup(ctx, ending{}); err != nil {
			r.log.Error("Cleanup after failure failed", "error", err)
		}
	}
	r.setState(ctx, RunnerFailed, reason)
	r.drainSignals()
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) && appErr.Type() == ErrRunnerFailed {
		return r.result(), cause
	}
	return r.result(), temporal.NewNonRetryableApplicationError(reason, ErrRunnerFailed, cause)
}

// cancelled cleans up on a context the cancellation does not reach, then reports the runner
// done and returns the cancellation.
func (r *runner) cancelled(ctx workflow.Context) (RunnerResult, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := r.cleanup(dctx, ending{}); err != nil {
		r.log.Error("Cleanup after cancellation failed", "error", err)
	}
	r.setState(dctx, RunnerDone, "cancelled")
	r.drainSignals()
	return r.result(), temporal.NewCanceledError()
}

// continueAsNew carries the runner into a new run once every signal and handler is settled.
// The signals are taken after the wait: a signal that arrived while it waited would otherwise
// stay in its channel and be lost with this run. (Neither step issues a command, so the order
// needs no version gate.)
func (r *runner) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	r.drainSignals()
	in := r.in
	in.Resume = &RunnerResume{
		Attempt: r.attempt, Registered: r.registered, RunnerID: r.reg.RunnerID,
		SecretName: r.reg.SecretName, SecretUID: r.reg.SecretUID, RunnerURL: r.reg.RunnerURL, PodUID: r.podUID,
		State: r.state, Observed: r.obs, ReportedJob: r.reportedJob,
	}
	return workflow.NewContinueAsNewError(ctx, RunnerWorkflowType, in)
}

// setState records a state change, keeps the search attributes current and reports it to the
// pool, once per change. A runner started without a pool (no pool workflow) reports to no one.
func (r *runner) setState(ctx workflow.Context, state RunnerState, reason string) {
	if state == r.state {
		// Same state: nothing to tell the pool, unless a busy runner now knows its job; a new
		// reason is kept for the next report.
		if reason != "" {
			r.reason = reason
		}
		if r.jobNews(state) && r.in.Pool != "" &&
			workflow.GetVersion(ctx, changeReportJob, workflow.DefaultVersion, 1) >= 1 {
			r.report(ctx, state, r.reason)
		}
		return
	}
	r.state, r.reason = state, reason
	if !r.lean {
		r.upsertSearchAttributes(ctx)
		r.report(ctx, state, reason)
		return
	}
	if (state == RunnerIdle || state == RunnerBusy || r.upserted == "") && state != r.upserted {
		r.upsertSearchAttributes(ctx) // the first state too, for a runner started without them
	}
	if state == RunnerIdle || state == RunnerBusy || state.Terminal() {
		r.report(ctx, state, reason)
	}
}

// startedState is the RunnerState the workflow was started with (its pool sets it), or empty.
func startedState(ctx workflow.Context) RunnerState {
	v, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(SearchAttrRunnerState)
	return RunnerState(v)
}

// Change ids of the runner workflow (see the list at the top of this file).
const (
	changeReportJob           = "report-job-to-pool"
	changeEphemeralDoneDrains = "ephemeral-done-drains"
	changeReadNotGuess        = "registration-check-reads"
	changeLeanLifecycle       = "lean-lifecycle"
	changeNeverOnlineEnds     = "never-online-ends"
	changeWarmApartCopy       = "warm-apart-copy"
	changeConfirmGone         = "confirm-gone-by-id"
	changeClusterLost         = "cluster-lost-hands-back"
	// changeSecretAfterScheduling: a JIT runner's pod comes first; its credential reaches the
	// namespace once the pod is scheduled and leaves it once the runner started
	// (runner_credential.go).
	changeSecretAfterScheduling = "secret-after-scheduling"
	// changeReportsBatched: reports go to the pool through the worker's group commit, by a
	// local activity, rather than by a signal of the runner's own.
	changeReportsBatched = "reports-batched"
)

// jobNews is true when a busy runner knows a job it has not reported to the pool yet.
func (r *runner) jobNews(state RunnerState) bool {
	return state == RunnerBusy && r.obs.JobID != 0 && r.obs.JobID != r.reportedJob
}

// report tells the pool the runner's state (and, while busy, its job). A runner started
// without a pool (no pool workflow) reports to no one.
func (r *runner) report(ctx workflow.Context, state RunnerState, reason string) {
	if r.in.Pool == "" {
		return
	}
	report := RunnerStateReport{
		Runner: r.in.Name, State: state, TemplateHash: r.in.Spec.TemplateHash, Slot: r.in.Slot,
		RunnerID: r.reg.RunnerID, Reason: reason, Busy: r.obs.Busy, Removing: r.obs.Force != nil,
	}
	if state == RunnerBusy {
		report.JobID, r.reportedJob = r.obs.JobID, r.obs.JobID
	}
	if n := len(r.obs.RecentJobs); n > 0 && (state == RunnerIdle || state.Terminal()) {
		report.EndedJob = r.obs.RecentJobs[n-1]
	}
	// Waiting for delivery keeps the pool's view in order: the next report leaves only after
	// this one arrived.
	if workflow.GetVersion(ctx, changeReportsBatched, workflow.DefaultVersion, 1) >= 1 {
		if r.reportInBatch(ctx, report) {
			return
		}
	}
	err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID(r.in.Pool), "", SignalRunnerState, report).Get(ctx, nil)
	var noPool *temporal.UnknownExternalWorkflowExecutionError
	if err != nil && !errors.As(err, &noPool) {
		r.log.Warn("Cannot report runner state to pool", "state", state, "error", err)
	}
}

// reportInBatch hands the report to the pool through the worker's group commit
// (ActivityReportRunnerState), which gives the reports of a burst's runners a few shared
// signals. False when it was not delivered within RunnerReportPolicy: the caller then
// signals the pool itself.
func (r *runner) reportInBatch(ctx workflow.Context, report RunnerStateReport) bool {
	ctx = workflow.WithLocalActivityOptions(ctx, RunnerReportPolicy)
	err := workflow.ExecuteLocalActivity(ctx, ActivityReportRunnerState, ReportRunnerStateInput{Pool: r.in.Pool, Report: report}).Get(ctx, nil)
	if err != nil {
		r.log.Warn("Cannot report runner state in a batch; signalling the pool", "state", report.State, "error", err)
		return false
	}
	return true
}

// upsertSearchAttributes keeps RunnerState and RunnerPool current, so the Temporal UI can list
// e.g. all busy runners of a pool.
func (r *runner) upsertSearchAttributes(ctx workflow.Context) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		SearchAttrRunnerState.ValueSet(string(r.state)), SearchAttrPool.ValueSet(r.in.Pool)); err != nil {
		r.log.Warn("Cannot update search attributes", "error", err)
		return
	}
	r.upserted = r.state
}

func (r *runner) setupHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (RunnerStatus, error) {
		return r.status(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateForceRemove,
		func(ctx workflow.Context, req ForceRemoveRequest) (ForceRemoveResult, error) {
			r.obs.recordForceRemove(req)
			r.wake.SendAsync(true)
			return ForceRemoveResult{State: RunnerDraining, Busy: r.obs.Busy}, nil
		},
		workflow.UpdateHandlerOptions{Validator: r.validateForceRemove}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateDrain,
		func(ctx workflow.Context, req DrainRequest) (DrainResult, error) {
			r.obs.recordDrain(req)
			r.wake.SendAsync(true)
			return DrainResult{State: RunnerDraining, Busy: r.obs.Busy}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(DrainRequest) error {
			if r.state.Terminal() {
				return fmt.Errorf("runner %s has already ended (%s)", r.in.Name, r.state)
			}
			return nil
		}})
}

func (r *runner) status() RunnerStatus {
	return RunnerStatus{
		Pool: r.in.Pool, Name: r.in.Name, Cluster: r.in.Cluster, State: r.state, TemplateHash: r.in.Spec.TemplateHash,
		Slot: r.in.Slot, RunnerID: r.reg.RunnerID, Attempt: r.attempt, PodPhase: r.obs.PodPhase,
		Online: r.obs.Online, Busy: r.obs.Busy, JobID: r.obs.JobID, JobsRun: r.obs.JobsRun,
		Draining: r.obs.Drain != nil || r.obs.Force != nil, Reason: r.reason,
		PodReason: r.obs.PodReason, PodCreatedAt: r.obs.PodCreatedAt, OnlineAt: r.obs.OnlineAt,
		CredentialWait: r.stepWait,
	}
}

func (r *runner) result() RunnerResult {
	return RunnerResult{
		Name: r.in.Name, FinalState: r.state, RunnerID: r.reg.RunnerID, JobsRun: r.obs.JobsRun, Reason: r.reason,
	}
}

func (r *runner) workflowID() string { return RunnerWorkflowID(r.in.Pool, r.in.Name) }

func (r *runner) runnerRef() RunnerRef {
	return RunnerRef{Scope: r.in.Spec.Scope, RunnerID: r.reg.RunnerID, Name: r.in.Name}
}

// secretRef is the runner's Secret in its own namespace. A warm registration kept apart is
// addressed there too, by its name: before the runner's copy exists, deleting it finds nothing,
// and the warm Secret itself is the pool's to remove.
func (r *runner) secretRef() SecretRef {
	return SecretRef{Cluster: r.in.Cluster, Namespace: r.in.Spec.Namespace, Name: r.reg.SecretName}
}

func (r *runner) podRef() PodRef {
	return PodRef{Cluster: r.in.Cluster, Namespace: r.in.Spec.Namespace, Name: r.in.Name, UID: r.podUID}
}

// mode is the registration mode, defaulted: JIT for ephemeral runners, a registration token
// for persistent ones (JIT runners are always ephemeral at GitHub).
func (s RunnerSpec) mode() RegistrationMode {
	switch {
	case s.Mode != "":
		return s.Mode
	case s.Ephemeral:
		return RegistrationJIT
	}
	return RegistrationToken
}

// validate reports every problem of a runner input at once.
func (in RunnerInput) validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if in.Pool == "" || in.Name == "" {
		add("pool and name are required")
	}
	if len(in.Name) > maxRunnerNameLength {
		add("runner name %q is longer than %d characters", in.Name, maxRunnerNameLength)
	}
	if in.Spec.Namespace == "" {
		add("spec.namespace is required")
	}
	if err := in.Spec.Scope.Validate(); err != nil {
		add("spec.scope: %v", err)
	}
	switch in.Spec.mode() {
	case RegistrationJIT:
		if !in.Spec.Ephemeral {
			add("JIT runners are always ephemeral; use mode %q for persistent runners", RegistrationToken)
		}
		if len(in.Spec.Labels) == 0 {
			add("spec.labels: GitHub requires at least one label for a JIT runner")
		}
	case RegistrationToken:
	default:
		add("spec.mode %q is not %q or %q", in.Spec.Mode, RegistrationJIT, RegistrationToken)
	}
	if in.Warm != nil && (in.Warm.SecretName == "" || in.Spec.mode() != RegistrationJIT) {
		add("a warm registration needs its secret name and JIT mode")
	}
	if !hasRunnerContainer(in.Spec.Template.Spec.Containers) {
		add("spec.template has no container named %q", runnerpod.RunnerContainerName)
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("invalid runner input: " + strings.Join(problems, "; "))
}
