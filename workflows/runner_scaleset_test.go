package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
)

// scaleSetRunnerHarness is the runner harness with the scale set's activities as stubs: every
// REST registration activity stays a stub that fails the test when called.
func scaleSetRunnerHarness(t *testing.T) *runnerHarness {
	h := newRunnerHarness(t).withPool()
	registerRunnerStub[CreateScaleSetRunnerInput, CreateScaleSetRunnerOutput](h, ActivityCreateScaleSetRunner)
	registerRunnerStub[RemoveScaleSetRunnerInput, RemoveScaleSetRunnerOutput](h, ActivityRemoveScaleSetRunner)
	h.env.OnActivity(ActivityCreateScaleSetRunner, mock.Anything, mock.MatchedBy(func(in CreateScaleSetRunnerInput) bool {
		return in.ScaleSetID == 5 && in.Name == runnerTestName && in.Namespace == runnerTestNS && in.Scope.Organization == "acme"
	})).Return(CreateScaleSetRunnerOutput{RunnerID: 9, SecretName: runnerTestName, SecretUID: "secret-uid"}, nil).Once()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.MatchedBy(func(in CreateRunnerPodInput) bool {
		return in.SecretName == runnerTestName && in.SecretUID == "secret-uid" && in.Mode == RegistrationJIT
	})).Return(CreateRunnerPodOutput{UID: "uid-1"}, nil).Once()
	return h
}

func scaleSetRunnerInput() RunnerInput {
	in := runnerTestInput(true)
	in.Spec.ScaleSetID = 5
	return in
}

// A scale set's runner takes its configuration from the set and runs its job with no REST call:
// its pod is created owned by the Secret the set's configuration was written into, and the
// job's end ends it (the service removes a just-in-time runner itself).
func TestScaleSetRunnerLivesWithoutARESTCall(t *testing.T) {
	h := scaleSetRunnerHarness(t)
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalJobStarted, jobSig(100))
	h.at(2*time.Second, SignalJobCompleted, jobSig(100))
	res := h.mustRun(scaleSetRunnerInput())
	if res.FinalState != RunnerDone {
		t.Errorf("result = %+v, want done", res)
	}
	want := []string{ActivityCreateScaleSetRunner, ActivityCreateRunnerPod, ActivityDeleteRunnerSecret}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// A drained scale-set runner is removed at the set, and the service's busy refusal is waited
// out: a busy runner is never removed, nor its pod deleted, while its job runs.
func TestScaleSetRunnerIsRemovedAtTheSetOnlyWhenNotBusy(t *testing.T) {
	h := scaleSetRunnerHarness(t)
	busy := temporal.NewApplicationError("job still running", ErrRunnerBusy)
	h.env.OnActivity(ActivityRemoveScaleSetRunner, mock.Anything, RemoveScaleSetRunnerInput{Scope: Scope{Organization: "acme"}, RunnerID: 9}).
		Return(RemoveScaleSetRunnerOutput{}, busy).Twice()
	h.env.OnActivity(ActivityRemoveScaleSetRunner, mock.Anything, mock.Anything).Return(RemoveScaleSetRunnerOutput{Removed: true}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalDrain, DrainRequest{Reason: "scale-down"})
	res := h.mustRun(scaleSetRunnerInput())
	if res.FinalState != RunnerDone {
		t.Errorf("result = %+v, want done", res)
	}
	want := []string{ActivityCreateScaleSetRunner, ActivityCreateRunnerPod,
		ActivityRemoveScaleSetRunner, ActivityRemoveScaleSetRunner, ActivityRemoveScaleSetRunner, ActivityDeleteRunnerSecret}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}
