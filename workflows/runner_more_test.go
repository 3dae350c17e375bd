package workflows

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

func TestRunnerPersistentKeepsRunningAcrossJobsUntilDrained(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.MatchedBy(func(in RegisterRunnerInput) bool {
		return in.Mode == RegistrationToken
	})).Return(RegisterRunnerOutput{SecretName: runnerTestName, RunnerURL: "https://github.com/acme"}, nil).Once()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.MatchedBy(func(in CreateRunnerPodInput) bool {
		return in.Mode == RegistrationToken && in.RunnerURL == "https://github.com/acme" && !in.Ephemeral &&
			slices.Equal(in.Labels, []string{"self-hosted", "linux"})
	})).Return(CreateRunnerPodOutput{UID: "uid-1"}, nil).Once()
	h.env.OnActivity(ActivitySetSecretOwner, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(2*time.Second, SignalRunnerStatus, onlineSig)
	for i := int64(1); i <= 3; i++ {
		h.at(time.Duration(i)*time.Hour, SignalJobStarted, jobSig(i))
		h.at(time.Duration(i)*time.Hour+20*time.Minute, SignalJobCompleted, jobSig(i))
	}
	// GitHub redelivers a completion by hand: it must not count twice.
	h.at(3*time.Hour+30*time.Minute, SignalJobCompleted, jobSig(2))
	h.at(5*time.Hour, SignalDrain, DrainRequest{Reason: "scale-down"})
	res := h.mustRun(runnerTestInput(false))
	if res.JobsRun != 3 || res.Reason != "drained: scale-down" {
		t.Errorf("result = %+v, want three jobs then drained", res)
	}
	busy := 0
	for _, s := range h.reportedStates() {
		if s == RunnerBusy {
			busy++
		}
	}
	if busy != 3 {
		t.Errorf("states %v, want three busy periods", h.reportedStates())
	}
}

func TestRunnerDuplicatePodSignalsAreHarmless(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.deletes(1)
	for i := 1; i <= 3; i++ {
		h.at(time.Duration(i)*time.Second, SignalPodStatus, podRunning("uid-1"))
	}
	// Another pod that once had the name (an earlier incarnation) fails: not ours.
	h.at(4*time.Second, SignalPodStatus, podSig("uid-other", PodFailed, "Evicted"))
	h.at(5*time.Second, SignalRunnerStatus, onlineSig)
	for i := 6; i <= 8; i++ {
		h.at(time.Duration(i)*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	}
	// A watcher restart re-lists and reports Running again, after the pod had already finished.
	h.at(8*time.Second, SignalPodStatus, podRunning("uid-1"))
	res := h.mustRun(runnerTestInput(true))
	if res.Reason != "pod succeeded" {
		t.Errorf("reason = %q, want pod succeeded", res.Reason)
	}
}

func TestRunnerPodCheckCatchesAMissedSignal(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(0, "uid-1")
	h.env.OnActivity(ActivityGetRunnerPod, mock.Anything, PodRef{Namespace: runnerTestNS, Name: runnerTestName, UID: "uid-1"}).
		Return(GetRunnerPodOutput{Exists: true, Phase: PodRunning}, nil).Once()
	h.env.OnActivity(ActivityGetRunnerPod, mock.Anything, mock.Anything).Return(GetRunnerPodOutput{Exists: false}, nil).Once()
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	if res := h.mustRun(runnerTestInput(false)); res.Reason != "pod gone" {
		t.Errorf("reason = %q, want pod gone found by the backstop check", res.Reason)
	}
}

func TestRunnerEphemeralPodThatDoesNotExitIsRemoved(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.deletes(1)
	h.at(time.Second, SignalJobStarted, jobSig(3))
	h.at(2*time.Second, SignalJobCompleted, jobSig(3))
	res := h.mustRun(runnerTestInput(true))
	if !strings.Contains(res.Reason, "job completed") || res.JobsRun != 1 {
		t.Errorf("result = %+v, want removal after the exit grace", res)
	}
}

func TestRunnerNotOwnedSecretFailsWithoutTouchingIt(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(RegisterRunnerOutput{},
		temporal.NewNonRetryableApplicationError("secret runners/pool-a-ab12-1 belongs to workflow x", ErrNotOwned, nil)).Once()
	_, err := h.run(runnerTestInput(true))
	if appErrorType(err) != ErrRunnerFailed || !strings.Contains(err.Error(), "belongs to workflow x") {
		t.Fatalf("error = %v, want a visible failure naming the owner", err)
	}
	if states := h.reportedStates(); states[len(states)-1] != RunnerFailed {
		t.Errorf("states = %v, want failed last", states)
	}
}

func TestRunnerNotOwnedPodCleansUpTheRegistration(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName}, nil).Once()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.Anything).Return(CreateRunnerPodOutput{},
		temporal.NewNonRetryableApplicationError("pod exists and is not ours", ErrNotOwned, nil)).Once()
	h.removes(1)
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Never()
	if _, err := h.run(runnerTestInput(true)); appErrorType(err) != ErrRunnerFailed {
		t.Fatalf("error = %v, want a visible failure", err)
	}
}

func TestRunnerInvalidInputFailsClearly(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	in := runnerTestInput(false)
	in.Spec.Mode = RegistrationJIT
	in.Spec.Scope = Scope{}
	in.Spec.Template.Spec.Containers[0].Name = "main"
	_, err := h.run(in)
	for _, want := range []string{"JIT runners are always ephemeral", "scope", `no container named "runner"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to mention %q", err, want)
		}
	}
	if appErrorType(err) != ErrRunnerFailed {
		t.Errorf("error type = %q, want %q", appErrorType(err), ErrRunnerFailed)
	}
}

func TestRunnerQueryStatus(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalJobStarted, jobSig(42))
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		var st RunnerStatus
		if err := v.Get(&st); err != nil {
			t.Fatalf("decode status: %v", err)
		}
		want := RunnerStatus{Pool: runnerTestPool, Name: runnerTestName, State: RunnerBusy, TemplateHash: "h1", RunnerID: 7,
			Attempt: 1, Online: true, Busy: true, JobID: 42}
		if st.PodCreatedAt.IsZero() || st.OnlineAt.Before(st.PodCreatedAt) {
			t.Errorf("status times: pod created %v, online %v; want both, in that order", st.PodCreatedAt, st.OnlineAt)
		}
		st.PodCreatedAt, st.OnlineAt = time.Time{}, time.Time{}
		if st != want {
			t.Errorf("status = %+v, want %+v", st, want)
		}
		h.env.SignalWorkflow(SignalPodStatus, podSig("uid-1", PodFailed, "Error"))
	}, 2*time.Second)
	h.mustRun(runnerTestInput(true))
}

func TestRunnerCancelledCleansUp(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.removes(1)
	h.deletes(1)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	_, err := h.run(runnerTestInput(true))
	if !temporal.IsCanceledError(err) {
		t.Fatalf("error = %v, want cancelled", err)
	}
	if states := h.reportedStates(); states[len(states)-1] != RunnerDone {
		t.Errorf("states = %v, want done last", states)
	}
}

// TestRunnerContinuesAsNewAndResumes runs a persistent runner until the server suggests a new
// run, then resumes the carried input in a fresh environment and drains it: no second
// registration, no second pod, the job count carried over.
func TestRunnerContinuesAsNewAndResumes(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(0, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.at(time.Second, SignalJobStarted, jobSig(1))
	h.at(time.Minute, SignalJobCompleted, jobSig(1))
	h.env.RegisterDelayedCallback(func() {
		h.env.SetContinueAsNewSuggested(true)
		h.env.SignalWorkflow(SignalJobStarted, jobSig(2))
	}, time.Hour)
	_, err := h.run(runnerTestInput(false))
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next RunnerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatalf("decode carried input: %v", err)
	}
	res := next.Resume
	if res == nil || res.PodUID != "uid-1" || res.Attempt != 1 || !res.Registered || res.Observed.JobsRun != 1 ||
		res.Observed.JobID != 2 || !res.Observed.Busy || res.State != RunnerBusy {
		t.Fatalf("carried state = %+v, want the pod, one job run and job 2 in progress", res)
	}

	h2 := newRunnerHarness(t).withPool()
	h2.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h2.removes(1)
	h2.deletes(1)
	h2.at(time.Second, SignalDrain, DrainRequest{Reason: "rollout"})
	h2.at(time.Minute, SignalJobCompleted, jobSig(2))
	final := h2.mustRun(next)
	if final.JobsRun != 2 || final.Reason != "drained: rollout" {
		t.Errorf("result = %+v, want two jobs then drained", final)
	}
	if slices.Contains(h2.callOrder(), ActivityRegisterRunner) || slices.Contains(h2.reportedStates(), RunnerPending) {
		t.Errorf("resumed run registered again or reported pending: calls %v states %v", h2.callOrder(), h2.reportedStates())
	}
}
