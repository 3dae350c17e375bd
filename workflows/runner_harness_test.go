package workflows

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
)

const (
	runnerTestPool = "pool-a"
	runnerTestName = "pool-a-ab12-1"
	runnerTestNS   = "runners"
)

// runnerTestInput is a runner of an organization-scoped pool; ephemeral runners use JIT, persistent
// ones a registration token.
func runnerTestInput(ephemeral bool) RunnerInput {
	return RunnerInput{
		Pool: runnerTestPool, Name: runnerTestName,
		Spec: RunnerSpec{
			Scope: Scope{Organization: "acme"}, Labels: []string{"self-hosted", "linux"},
			Ephemeral: ephemeral, Namespace: runnerTestNS, TemplateHash: "h1",
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:2"}},
			}},
		},
	}
}

// runnerHarness runs one runner workflow in the test environment, with every activity registered as
// a stub that fails the test unless a test mocked it, and records reports, search attribute
// states and the activity call order.
type runnerHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	mu      sync.Mutex
	reports []RunnerStateReport
	saState []string
	calls   []string
}

func newRunnerHarness(t *testing.T) *runnerHarness {
	t.Helper()
	return newRunnerHarnessIn(t, &testsuite.WorkflowTestSuite{})
}

// newRunnerHarnessIn builds the harness in a suite the test prepared (e.g. with a metrics handler).
// Its runners write their Secret before their pod, as histories before
// changeSecretAfterScheduling do: the tests of everything else keep that order, and
// runner_credential_test.go (newPodFirstHarness) tests the pod-first one.
func newRunnerHarnessIn(t *testing.T, suite *testsuite.WorkflowTestSuite) *runnerHarness {
	t.Helper()
	h := buildRunnerHarness(t, suite)
	// Maybe: token-mode runners and invalid inputs never ask.
	h.env.OnGetVersion(changeSecretAfterScheduling, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion).Maybe()
	return h
}

// newPodFirstHarness is the harness with its runners' pods created before their Secrets
// (changeSecretAfterScheduling).
func newPodFirstHarness(t *testing.T) *runnerHarness {
	t.Helper()
	return buildRunnerHarness(t, &testsuite.WorkflowTestSuite{})
}

func buildRunnerHarness(t *testing.T, suite *testsuite.WorkflowTestSuite) *runnerHarness {
	t.Helper()
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	h := &runnerHarness{t: t, env: suite.NewTestWorkflowEnvironment()}
	h.env.RegisterWorkflowWithOptions(RunnerWorkflow, workflow.RegisterOptions{Name: RunnerWorkflowType})
	h.env.RegisterWorkflow(startLikeAPool)
	registerRunnerStub[RegisterRunnerInput, RegisterRunnerOutput](h, ActivityRegisterRunner)
	registerRunnerStub[RunnerRef, GetRunnerOutput](h, ActivityGetRunner)
	registerRunnerStub[RunnerRef, RemoveRunnerOutput](h, ActivityRemoveRunner)
	registerRunnerStub[CreateRunnerPodInput, CreateRunnerPodOutput](h, ActivityCreateRunnerPod)
	registerRunnerStub[StartWarmRunnerInput, StartWarmRunnerOutput](h, ActivityStartWarmRunner)
	registerRunnerStub[SetSecretOwnerInput, Nothing](h, ActivitySetSecretOwner)
	registerRunnerStub[PodRef, GetRunnerPodOutput](h, ActivityGetRunnerPod)
	registerRunnerStub[PodRef, Nothing](h, ActivityDeleteRunnerPod)
	registerRunnerStub[SecretRef, Nothing](h, ActivityDeleteRunnerSecret)
	registerRunnerStub[CopyWarmSecretInput, CopyWarmSecretOutput](h, ActivityCopyWarmSecret)
	// The worker's group commit takes every report (changeReportsBatched) and answers as
	// delivered whether or not the pool exists. Runners of histories before the change signal
	// the pool (withPool).
	h.env.RegisterActivityWithOptions(func(_ context.Context, in ReportRunnerStateInput) error {
		if in.Pool != runnerTestPool {
			t.Errorf("report for pool %q, want %q", in.Pool, runnerTestPool)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reports = append(h.reports, in.Report)
		return nil
	}, activity.RegisterOptions{Name: ActivityReportRunnerState})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls = append(h.calls, info.ActivityType.Name)
	})
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		state, _ := sa.GetKeyword(SearchAttrRunnerState)
		if pool, _ := sa.GetKeyword(SearchAttrPool); pool != runnerTestPool {
			t.Errorf("RunnerPool search attribute = %q, want %q", pool, runnerTestPool)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.saState = append(h.saState, state)
	})
	return h
}

// registerRunnerStub registers an activity under name that fails the test when called unmocked.
func registerRunnerStub[I, O any](h *runnerHarness, name string) {
	h.env.RegisterActivityWithOptions(func(context.Context, I) (O, error) {
		var out O
		h.t.Errorf("unexpected call of activity %s", name)
		return out, temporal.NewNonRetryableApplicationError("unexpected activity call", "Unexpected", nil)
	}, activity.RegisterOptions{Name: name})
}

// withPool makes the pool workflow exist: reports are recorded.
func (h *runnerHarness) withPool() *runnerHarness {
	h.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID(runnerTestPool), "", SignalRunnerState, mock.Anything).Return(
		func(_ string, _ string, _ string, _ string, arg any) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.reports = append(h.reports, arg.(RunnerStateReport))
			return nil
		}).Maybe() // histories before changeReportsBatched signal the pool; later ones batch
	return h
}

// before runs the workflow as a history written before the change id: GetVersion answers
// DefaultVersion for it, as it does when an old history replays.
func (h *runnerHarness) before(changeID string) *runnerHarness {
	h.env.OnGetVersion(changeID, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	return h
}

// withoutPool makes the pool workflow unknown, as for a runner started on its own.
func (h *runnerHarness) withoutPool() *runnerHarness {
	h.env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID(runnerTestPool), "", SignalRunnerState, mock.Anything).Return(
		&temporal.UnknownExternalWorkflowExecutionError{}).Maybe()
	return h
}

// registered mocks a successful registration (runner id 0 in token mode) and pod creation, as
// a worker before Secret-owned pods answers it (no Secret UID): the pod is made the Secret's
// owner by a patch, and both are deleted. ownedRegistered mocks today's answer.
func (h *runnerHarness) registered(runnerID int64, podUIDs ...string) {
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(
		RegisterRunnerOutput{RunnerID: runnerID, SecretName: runnerTestName}, nil).Times(len(podUIDs))
	for _, uid := range podUIDs {
		h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.Anything).Return(CreateRunnerPodOutput{UID: uid}, nil).Once()
	}
	h.env.OnActivity(ActivitySetSecretOwner, mock.Anything, mock.Anything).Return(Nothing{}, nil).Times(len(podUIDs))
}

// ownedRegistered mocks registrations as today's worker answers them: the registration creates
// the pod, owned by the Secret.
func (h *runnerHarness) ownedRegistered(runnerID int64, podUIDs ...string) {
	for _, uid := range podUIDs {
		h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.MatchedBy(func(in RegisterRunnerInput) bool {
			return in.Pod != nil && in.Pod.Name == in.Name
		})).Return(RegisterRunnerOutput{RunnerID: runnerID, SecretName: runnerTestName, SecretUID: "secret-uid",
			Pod: &CreateRunnerPodOutput{UID: uid}}, nil).Once()
	}
}

// deletes mocks n pod and secret deletions.
func (h *runnerHarness) deletes(n int) {
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Times(n)
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Times(n)
}

// removes mocks n successful unregistrations.
func (h *runnerHarness) removes(n int) {
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Return(RemoveRunnerOutput{Removed: true}, nil).Times(n)
}

// podChecks answers every backstop pod read with the given state.
func (h *runnerHarness) podChecks(out GetRunnerPodOutput) {
	h.env.OnActivity(ActivityGetRunnerPod, mock.Anything, mock.Anything).Return(out, nil).Maybe()
}

// at sends a signal at a workflow time.
func (h *runnerHarness) at(d time.Duration, name string, arg any) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, arg) }, d)
}

func (h *runnerHarness) run(in RunnerInput) (RunnerResult, error) {
	h.t.Helper()
	h.env.ExecuteWorkflow(RunnerWorkflowType, in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
	var res RunnerResult
	err := h.env.GetWorkflowError()
	if err == nil {
		if gerr := h.env.GetWorkflowResult(&res); gerr != nil {
			h.t.Fatalf("decode result: %v", gerr)
		}
	}
	h.env.AssertExpectations(h.t)
	return res, err
}

// mustRun runs the workflow and fails the test unless it completed without error.
func (h *runnerHarness) mustRun(in RunnerInput) RunnerResult {
	h.t.Helper()
	res, err := h.run(in)
	if err != nil {
		h.t.Fatalf("workflow failed: %v", err)
	}
	return res
}

func (h *runnerHarness) reportedStates() []RunnerState {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []RunnerState
	for _, r := range h.reports {
		out = append(out, r.State)
	}
	return out
}

func (h *runnerHarness) callOrder() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func countCalls(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

// errorType is the application error type inside a workflow error, "" if none.
func appErrorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func podRunning(uid string) PodStatusSignal {
	return PodStatusSignal{Pod: runnerTestName, UID: uid, Phase: PodRunning}
}

func podSig(uid string, phase PodPhase, reason string) PodStatusSignal {
	return PodStatusSignal{Pod: runnerTestName, UID: uid, Phase: phase, Reason: reason}
}

func jobSig(id int64) JobSignal { return JobSignal{JobID: id, RunnerName: runnerTestName} }

var onlineSig = RunnerStatusSignal{Online: true}
