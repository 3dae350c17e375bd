package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
)

// warmRunnerInput is an ephemeral runner its pool started with a warm registration (id 9).
func warmRunnerInput() RunnerInput {
	in := runnerTestInput(true)
	in.Warm = &RegisterRunnerOutput{RunnerID: 9, SecretName: runnerTestName}
	return in
}

// A runner started with a warm registration creates its pod at once: no GitHub call before it.
func TestRunnerWithWarmRegistrationStartsWithoutRegistering(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.MatchedBy(func(in CreateRunnerPodInput) bool {
		return in.SecretName == runnerTestName && in.Mode == RegistrationJIT
	})).Return(CreateRunnerPodOutput{UID: "uid-1"}, nil).Once()
	h.env.OnActivity(ActivitySetSecretOwner, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.deletes(1)
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(2*time.Second, SignalRunnerStatus, onlineSig)
	h.at(3*time.Second, SignalJobStarted, jobSig(100))
	h.at(4*time.Second, SignalJobCompleted, jobSig(100))
	h.at(5*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	res := h.mustRun(warmRunnerInput())
	if res.FinalState != RunnerDone || res.RunnerID != 9 || res.JobsRun != 1 {
		t.Errorf("result %+v, want done with the warm registration's runner id 9 and one job", res)
	}
	want := []string{ActivityCreateRunnerPod, ActivitySetSecretOwner, ActivityDeleteRunnerPod, ActivityDeleteRunnerSecret}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
	for _, rep := range h.reports {
		if rep.State == RunnerBusy && rep.RunnerID != 9 {
			t.Errorf("report %+v does not carry the warm registration's runner id", rep)
		}
	}
}

// If the warm registration's pod never brings the runner online, the registration is removed
// like any other and the next attempt registers normally.
func TestRunnerWithWarmRegistrationRegistersOnItsNextAttempt(t *testing.T) {
	h := newRunnerHarness(t).withPool().before(changeNeverOnlineEnds)
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.Anything).Return(CreateRunnerPodOutput{UID: "uid-1"}, nil).Once()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.Anything).Return(CreateRunnerPodOutput{UID: "uid-2"}, nil).Once()
	h.env.OnActivity(ActivitySetSecretOwner, mock.Anything, mock.Anything).Return(Nothing{}, nil).Twice()
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 9, Name: runnerTestName}).
		Return(GetRunnerOutput{Found: true, RunnerID: 9}, nil).Once()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 9, Name: runnerTestName}).
		Return(RemoveRunnerOutput{Removed: true}, nil).Once()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.MatchedBy(func(in RegisterRunnerInput) bool {
		return in.Name == runnerTestName && in.Mode == RegistrationJIT
	})).Return(RegisterRunnerOutput{RunnerID: 10, SecretName: runnerTestName}, nil).Once()
	h.deletes(2)
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(DefaultRegistrationTimeout+20*time.Second, SignalRunnerStatus, onlineSig)
	h.at(DefaultRegistrationTimeout+30*time.Second, SignalPodStatus, podSig("uid-2", PodSucceeded, ""))
	res := h.mustRun(warmRunnerInput())
	if res.FinalState != RunnerDone || res.RunnerID != 10 {
		t.Errorf("result %+v, want done on the second registration (id 10)", res)
	}
	calls := h.callOrder()
	want := []string{ActivityCreateRunnerPod, ActivitySetSecretOwner, ActivityGetRunnerPod, ActivityGetRunner, ActivityRemoveRunner,
		ActivityDeleteRunnerPod, ActivityDeleteRunnerSecret, ActivityRegisterRunner, ActivityCreateRunnerPod, ActivitySetSecretOwner}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Errorf("activity calls = %v, want them to begin %v", calls, want)
	}
}

// A runner drained before its pod exists removes the warm registration it was handed: it owns
// it from its start, so nothing is left at GitHub or as a Secret.
func TestRunnerDrainedBeforeStartRemovesItsWarmRegistration(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 9, Name: runnerTestName}).
		Return(RemoveRunnerOutput{Removed: true}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalDrain, DrainRequest{Reason: "scale down"}) }, 0)
	res := h.mustRun(warmRunnerInput())
	if res.FinalState != RunnerDone {
		t.Errorf("result %+v, want done", res)
	}
	if got := h.callOrder(); !slices.Equal(got, []string{ActivityRemoveRunner, ActivityDeleteRunnerSecret}) {
		t.Errorf("activity calls = %v, want the warm registration removed, then its secret", got)
	}
}

// warmApartInput is warmRunnerInput with the warm registration's Secret kept in the worker's
// warm namespace, as pools hand them since changeWarmApart.
func warmApartInput() RunnerInput {
	in := warmRunnerInput()
	in.Warm.SecretUID, in.Warm.SecretNamespace = "warm-uid", "runnerflow-warm"
	return in
}

// A runner whose warm registration is kept apart starts with one activity that copies the
// credential into its own Secret, in its own namespace, and creates the pod owned by it; its
// end deletes that Secret (the pod goes with it). The warm Secret is never its to delete.
func TestRunnerWithWarmRegistrationApartStartsFromACopy(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityStartWarmRunner, mock.Anything, mock.MatchedBy(func(in StartWarmRunnerInput) bool {
		return in.Warm == SecretRef{Namespace: "runnerflow-warm", Name: runnerTestName} &&
			in.Pod.Namespace == runnerTestNS && in.Pod.Name == runnerTestName && in.Pod.SecretName == runnerTestName &&
			in.Pod.WorkflowID == RunnerWorkflowID(runnerTestPool, runnerTestName) && in.Pod.Mode == RegistrationJIT
	})).Return(StartWarmRunnerOutput{SecretName: runnerTestName, SecretUID: "own-uid", Pod: CreateRunnerPodOutput{UID: "uid-1"}}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(2*time.Second, SignalRunnerStatus, onlineSig)
	h.at(3*time.Second, SignalJobStarted, jobSig(100))
	h.at(4*time.Second, SignalJobCompleted, jobSig(100))
	res := h.mustRun(warmApartInput())
	if res.FinalState != RunnerDone || res.RunnerID != 9 || res.JobsRun != 1 {
		t.Errorf("result %+v, want done with the warm registration's runner id 9 and one job", res)
	}
	if got, want := h.callOrder(), []string{ActivityStartWarmRunner, ActivityDeleteRunnerSecret}; !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v (3 Kubernetes writes before changeSecretAfterScheduling: the copy, the pod, the delete)", got, want)
	}
}

// Drained before it started, a runner with a warm registration kept apart removes the
// registration at GitHub and looks for its own Secret only in its own namespace (none yet:
// NotFound is success); the warm Secret is its pool's to remove.
func TestRunnerWithWarmRegistrationApartDrainedBeforeStart(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 9, Name: runnerTestName}).
		Return(RemoveRunnerOutput{Removed: true}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalDrain, DrainRequest{Reason: "scale down"}) }, 0)
	if res := h.mustRun(warmApartInput()); res.FinalState != RunnerDone {
		t.Errorf("result %+v, want done", res)
	}
	if got := h.callOrder(); !slices.Equal(got, []string{ActivityRemoveRunner, ActivityDeleteRunnerSecret}) {
		t.Errorf("activity calls = %v", got)
	}
}
