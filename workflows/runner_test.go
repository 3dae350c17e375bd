package workflows

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
)

func TestRunnerEphemeralHappyPath(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.MatchedBy(func(in RegisterRunnerInput) bool {
		return in.Mode == RegistrationJIT && in.Name == runnerTestName && in.WorkflowID == RunnerWorkflowID(runnerTestPool, runnerTestName) &&
			in.Scope.Organization == "acme" && slices.Equal(in.Labels, []string{"self-hosted", "linux"}) &&
			in.Pod != nil && in.Pod.Name == runnerTestName && in.Pod.Mode == RegistrationJIT && in.Pod.TemplateHash == "h1" &&
			in.Pod.Namespace == runnerTestNS && in.Pod.WorkflowID == in.WorkflowID
	})).Return(RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid",
		Pod: &CreateRunnerPodOutput{UID: "uid-1"}}, nil).Once()
	// The registration creates the pod, owned by its Secret: no pod activity, no owner patch,
	// and deleting the Secret is the one write that ends the runner (the cluster's garbage
	// collector takes the pod).
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Never()

	h.at(1*time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(2*time.Second, SignalRunnerStatus, onlineSig)
	h.at(3*time.Second, SignalJobStarted, jobSig(100))
	h.at(4*time.Second, SignalJobCompleted, jobSig(100))
	h.at(5*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	res := h.mustRun(runnerTestInput(true))

	// An ephemeral runner's work is over with its job: it ends on the completed notice
	// (GitHub removes the runner; its exiting pod goes with the Secret).
	want := RunnerResult{Name: runnerTestName, FinalState: RunnerDone, RunnerID: 7, JobsRun: 1, Reason: "job completed"}
	if res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	// The pool hears what it decides on: idle (free capacity), busy with the job (whose
	// reservation ends with the runner), and the end. After its job an ephemeral runner is
	// leaving: never idle again.
	wantStates := []RunnerState{RunnerIdle, RunnerBusy, RunnerDone}
	if got := h.reportedStates(); !slices.Equal(got, wantStates) {
		t.Errorf("reported states = %v, want %v", got, wantStates)
	}
	for _, rep := range h.reports {
		if rep.State == RunnerBusy && rep.JobID != 100 {
			t.Errorf("busy report %+v does not name the job (100): the pool could not end its reservation", rep)
		}
		if rep.State == RunnerDone && rep.EndedJob != 100 {
			t.Errorf("final report %+v does not name the job it ended (100)", rep)
		}
	}
	// Started without search attributes (no pool set them), it writes its first state; then
	// only the live states operators filter by. A closed runner's status is its execution's.
	if want := []string{string(RunnerPending), string(RunnerIdle), string(RunnerBusy)}; !slices.Equal(h.saState, want) {
		t.Errorf("RunnerState search attribute writes = %v, want %v", h.saState, want)
	}
	// Nothing is checked that the watcher already told.
	wantCalls := []string{ActivityRegisterRunner, ActivityDeleteRunnerSecret}
	if got := h.callOrder(); !slices.Equal(got, wantCalls) {
		t.Errorf("activity calls = %v, want %v", got, wantCalls)
	}
}

func TestRunnerReportsWhatItsPoolDecidesOnInOrder(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.removes(1)
	h.deletes(1)
	h.at(1*time.Second, SignalJobStarted, jobSig(1))
	h.at(2*time.Second, SignalDrain, DrainRequest{Reason: "scale-down"})
	h.at(3*time.Second, SignalJobCompleted, jobSig(1))
	h.mustRun(runnerTestInput(false))
	h.mu.Lock()
	defer h.mu.Unlock()
	want := []RunnerState{RunnerBusy, RunnerDone}
	var got []RunnerState
	for _, r := range h.reports {
		got = append(got, r.State)
		if r.Runner != runnerTestName || r.TemplateHash != "h1" {
			t.Errorf("report %+v does not name the runner and its template hash", r)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported states = %v, want %v", got, want)
	}
	if last := h.reports[len(h.reports)-1]; last.RunnerID != 7 || last.Reason != "drained: scale-down" {
		t.Errorf("final report = %+v, want runner id 7 and the drain reason", last)
	}
}

func TestRunnerWithoutPoolStillCompletes(t *testing.T) {
	h := newRunnerHarness(t).withoutPool()
	h.registered(7, "uid-1")
	h.deletes(1)
	h.at(time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	if res := h.mustRun(runnerTestInput(true)); res.FinalState != RunnerDone {
		t.Errorf("final state = %s, want done", res.FinalState)
	}
}

// Before changeNeverOnlineEnds, a runner that never came online registered again in its own
// workflow.
func TestRunnerRegistrationTimeoutRegistersAgain(t *testing.T) {
	h := newRunnerHarness(t).withPool().before(changeNeverOnlineEnds)
	h.registered(7, "uid-1", "uid-2")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 7, Name: runnerTestName}).
		Return(GetRunnerOutput{Found: true, RunnerID: 7, Online: false}, nil).Once()
	h.removes(1)
	h.deletes(2)
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	// A late signal about the first attempt's pod must not end the second attempt.
	h.at(DefaultRegistrationTimeout+10*time.Second, SignalPodStatus, podSig("uid-1", PodGone, ""))
	h.at(DefaultRegistrationTimeout+20*time.Second, SignalRunnerStatus, onlineSig)
	h.at(DefaultRegistrationTimeout+30*time.Second, SignalPodStatus, podSig("uid-2", PodSucceeded, ""))
	res := h.mustRun(runnerTestInput(true))
	if res.FinalState != RunnerDone || res.Reason != "pod succeeded" {
		t.Errorf("result = %+v, want done after the pod succeeded", res)
	}
	calls := h.callOrder()
	// Unregister before deleting the pod: a runner that came online meanwhile is protected by
	// GitHub's 422.
	wantTeardown := []string{ActivityGetRunnerPod, ActivityGetRunner, ActivityRemoveRunner, ActivityDeleteRunnerPod,
		ActivityDeleteRunnerSecret, ActivityRegisterRunner}
	i := slices.Index(calls, ActivityGetRunnerPod)
	if i < 0 || !slices.Equal(calls[i:i+len(wantTeardown)], wantTeardown) {
		t.Errorf("activity calls = %v, want the teardown sequence %v", calls, wantTeardown)
	}
}

func TestRunnerRegistrationLimitFailsVisibly(t *testing.T) {
	h := newRunnerHarness(t).withPool().before(changeNeverOnlineEnds)
	h.registered(7, "uid-1", "uid-2", "uid-3")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	// Registered at GitHub every time, never connected: the one case for a fresh registration.
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7}, nil).Times(MaxRegistrationAttempts)
	h.removes(MaxRegistrationAttempts)
	h.deletes(MaxRegistrationAttempts)
	_, err := h.run(runnerTestInput(true))
	if err == nil || appErrorType(err) != ErrRunnerFailed {
		t.Fatalf("workflow error = %v, want a %s failure", err, ErrRunnerFailed)
	}
	if !strings.Contains(err.Error(), "did not come online after 3 attempts") {
		t.Errorf("error %q does not say why", err)
	}
	states := h.reportedStates()
	if states[len(states)-1] != RunnerFailed {
		t.Errorf("final state = %v, want failed", states)
	}
}

func TestRunnerFoundOnlineAtTimeoutCheckIsKept(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7, Online: true}, nil).Once()
	h.deletes(1)
	h.at(DefaultRegistrationTimeout+time.Minute, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	res := h.mustRun(runnerTestInput(true))
	if res.FinalState != RunnerDone || countCalls(h.callOrder(), ActivityRegisterRunner) != 1 {
		t.Errorf("result %+v after calls %v, want one registration and done", res, h.callOrder())
	}
	if !slices.Contains(h.reportedStates(), RunnerIdle) {
		t.Errorf("states %v never report the runner idle after the check found it online", h.reportedStates())
	}
}

// A registration GitHub no longer lists while its pod runs means the runner's work is over (an
// ephemeral runner GitHub removed after its job, or someone removed it): the runner ends, with
// nothing left to unregister, and registers no other runner.
func TestRunnerNotListedAtGitHubWhileItsPodRunsEnds(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: false}, nil).Once()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Never()
	h.deletes(1)
	res := h.mustRun(runnerTestInput(true))
	if res.FinalState != RunnerDone || !strings.Contains(res.Reason, "no longer registered") ||
		countCalls(h.callOrder(), ActivityRegisterRunner) != 1 {
		t.Errorf("result %+v after calls %v, want done on the one registration", res, h.callOrder())
	}
}

// GitHub that cannot be read at the registration timeout (5xx, a spent budget) is asked again
// a minute later; the runner is never torn down on a failed read.
func TestRunnerGitHubUnreadableAtTimeoutIsAskedAgain(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).
		Return(GetRunnerOutput{}, temporal.NewNonRetryableApplicationError("GitHub 502", ErrTransient, nil)).Once()
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7, Online: true}, nil).Once()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Never()
	h.deletes(1)
	h.at(DefaultRegistrationTimeout+5*time.Minute, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	res := h.mustRun(runnerTestInput(true))
	if res.FinalState != RunnerDone || res.Reason != "pod succeeded" || countCalls(h.callOrder(), ActivityRegisterRunner) != 1 ||
		countCalls(h.callOrder(), ActivityGetRunner) != 2 {
		t.Errorf("result %+v after calls %v, want GitHub asked twice and the runner kept until its pod succeeded", res, h.callOrder())
	}
}

func TestRunnerExitedPodAtTimeoutCheckFinishes(t *testing.T) {
	// The watcher's signal was lost; the timeout's pod read finds the job already done.
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.env.OnActivity(ActivityGetRunnerPod, mock.Anything, mock.Anything).Return(GetRunnerPodOutput{Exists: true, Phase: PodSucceeded}, nil).Once()
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Never()
	h.deletes(1)
	if res := h.mustRun(runnerTestInput(true)); res.Reason != "pod succeeded" {
		t.Errorf("reason = %q, want pod succeeded", res.Reason)
	}
}

func TestRunnerBusyOnUnregisterRetriesUntilRemoved(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(0, "uid-1")
	busy := h.env.OnActivity(ActivityRemoveRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, Name: runnerTestName}).
		Return(RemoveRunnerOutput{}, temporal.NewApplicationError("runner is running a job", ErrRunnerBusy)).Twice()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Return(RemoveRunnerOutput{Removed: true}, nil).Once().NotBefore(busy)
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalDrain, DrainRequest{Reason: "scale-down"})
	res := h.mustRun(runnerTestInput(false))
	if res.FinalState != RunnerDone {
		t.Errorf("final state = %s, want done", res.FinalState)
	}
	calls := h.callOrder()
	last := slices.Index(calls, ActivityDeleteRunnerPod)
	if countCalls(calls[:last], ActivityRemoveRunner) != 3 {
		t.Errorf("calls = %v, want three unregister attempts before the pod is deleted", calls)
	}
}

func TestRunnerPodGoneMidRun(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalPodStatus, podSig("uid-1", PodGone, ""))
	if res := h.mustRun(runnerTestInput(true)); res.Reason != "pod gone" || res.FinalState != RunnerDone {
		t.Errorf("result = %+v, want done because the pod is gone", res)
	}
}

func TestRunnerPodEvictedOrCrashed(t *testing.T) {
	for _, tc := range []struct{ name, reason, want string }{
		{"evicted", "Evicted", "pod failed: Evicted"},
		{"crashed", "Error", "pod failed: Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRunnerHarness(t).withPool()
			h.registered(7, "uid-1")
			h.removes(1) // a crashed runner's registration is removed, not left behind
			h.deletes(1)
			h.at(time.Second, SignalJobStarted, jobSig(5))
			h.at(2*time.Second, SignalPodStatus, podSig("uid-1", PodFailed, tc.reason))
			if res := h.mustRun(runnerTestInput(true)); res.Reason != tc.want {
				t.Errorf("reason = %q, want %q", res.Reason, tc.want)
			}
		})
	}
}

func TestRunnerDrainWhileIdle(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalDrain, DrainRequest{Reason: "rollout"})
	res := h.mustRun(runnerTestInput(true))
	if res.Reason != "drained: rollout" {
		t.Errorf("reason = %q, want drained: rollout", res.Reason)
	}
	want := []string{ActivityRemoveRunner, ActivityDeleteRunnerPod, ActivityDeleteRunnerSecret}
	if calls := h.callOrder(); !slices.Equal(calls[len(calls)-3:], want) {
		t.Errorf("calls = %v, want to end with %v", calls, want)
	}
}

func TestRunnerDrainWhileBusyWaitsForTheJob(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.deletes(1)
	var jobDone atomic.Bool
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Return(RemoveRunnerOutput{Removed: true}, nil).Once().Run(
		func(mock.Arguments) {
			if !jobDone.Load() {
				t.Error("runner unregistered while its job was running")
			}
		})
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.at(time.Second, SignalJobStarted, jobSig(9))
	var accepted DrainResult
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdateDrain, "drain-1", &drainCallback{t: t, result: &accepted}, DrainRequest{Reason: "operator"})
	}, 2*time.Second)
	h.env.RegisterDelayedCallback(func() {
		jobDone.Store(true)
		h.env.SignalWorkflow(SignalJobCompleted, jobSig(9))
	}, 3*time.Hour)
	res := h.mustRun(runnerTestInput(false))
	if accepted != (DrainResult{State: RunnerDraining, Busy: true}) {
		t.Errorf("drain update answered %+v, want draining and busy", accepted)
	}
	if res.Reason != "drained: operator" || res.JobsRun != 1 {
		t.Errorf("result = %+v, want drained after one job", res)
	}
}

func TestRunnerStuckOfflineIsReplaced(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalRunnerStatus, RunnerStatusSignal{Online: false})
	res := h.mustRun(runnerTestInput(true))
	if !strings.Contains(res.Reason, "offline") {
		t.Errorf("reason = %q, want the runner replaced for being offline", res.Reason)
	}
}

func TestRunnerBriefOfflineIsTolerated(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalRunnerStatus, RunnerStatusSignal{Online: false})
	h.at(time.Minute, SignalRunnerStatus, onlineSig)
	h.at(time.Hour, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	if res := h.mustRun(runnerTestInput(true)); res.Reason != "pod succeeded" {
		t.Errorf("reason = %q, want the runner kept until its pod succeeded", res.Reason)
	}
}

// drainCallback records an update's outcome.
type drainCallback struct {
	t      *testing.T
	result *DrainResult
}

func (u *drainCallback) Accept()          {}
func (u *drainCallback) Reject(err error) { u.t.Errorf("drain update rejected: %v", err) }
func (u *drainCallback) Complete(v any, err error) {
	if err != nil {
		u.t.Errorf("drain update failed: %v", err)
		return
	}
	*u.result = v.(DrainResult)
}
