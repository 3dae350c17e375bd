package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// A runner its pool started with RunnerState and RunnerPool set writes RunnerState only when it
// goes idle or busy, and keeps one deadline timer while later deadlines come and go.
func TestRunnerStartedWithSearchAttributesWritesOnlyLiveStates(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	id := RunnerWorkflowID(runnerTestPool, runnerTestName)
	h.ownedRegistered(7, "uid-1")
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	var timers int
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	signal := func(d time.Duration, name string, arg any) {
		h.env.RegisterDelayedCallback(func() {
			if err := h.env.SignalWorkflowByID(id, name, arg); err != nil {
				t.Error(err)
			}
		}, d)
	}
	signal(1*time.Second, SignalJobStarted, jobSig(100))
	signal(2*time.Second, SignalJobCompleted, jobSig(100))
	signal(3*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	h.env.ExecuteWorkflow(startLikeAPool, runnerTestInput(true))
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	h.env.AssertExpectations(t)

	if want := []string{string(RunnerBusy)}; !slices.Equal(h.saState, want) {
		t.Errorf("RunnerState writes = %v, want %v", h.saState, want)
	}
	// One timer: the registration deadline's, kept while later deadlines come and go; the
	// job's end ends the runner at once (no wait for its pod's exit).
	if timers != 1 {
		t.Errorf("%d timers started, want 1", timers)
	}
	if got := h.reportedStates(); !slices.Equal(got, []RunnerState{RunnerBusy, RunnerDone}) {
		t.Errorf("reported states = %v, want busy, done", got)
	}
}

// A runner that registers again deletes its old pod itself: the next attempt's pod takes the
// same name, and the garbage collector would take the old one only some time later.
func TestRunnerRegisteringAgainDeletesItsSecretOwnedPodFirst(t *testing.T) {
	h := newRunnerHarness(t).withPool().before(changeNeverOnlineEnds)
	h.ownedRegistered(7, "uid-1", "uid-2")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7}, nil).Once()
	h.removes(1)
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, PodRef{Namespace: runnerTestNS, Name: runnerTestName, UID: "uid-1"}).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Twice()
	h.at(DefaultRegistrationTimeout+20*time.Second, SignalRunnerStatus, onlineSig)
	h.at(DefaultRegistrationTimeout+30*time.Second, SignalPodStatus, podSig("uid-2", PodSucceeded, ""))
	res := h.mustRun(runnerTestInput(true))
	if res.FinalState != RunnerDone {
		t.Errorf("result = %+v, want done", res)
	}
	want := []string{ActivityRegisterRunner, ActivityGetRunnerPod, ActivityGetRunner,
		ActivityRemoveRunner, ActivityDeleteRunnerPod, ActivityDeleteRunnerSecret, ActivityRegisterRunner,
		ActivityDeleteRunnerSecret}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

func TestRunnerStatusSignalToldBy(t *testing.T) {
	for _, tc := range []struct {
		status RunnerStatusSignal
		state  RunnerState
		told   bool
	}{
		{RunnerStatusSignal{Online: true, Busy: true}, RunnerBusy, true},
		{RunnerStatusSignal{Online: true, Busy: true}, RunnerIdle, false},
		{RunnerStatusSignal{Online: true, Busy: true}, RunnerPending, false},
		{RunnerStatusSignal{Online: true}, RunnerIdle, true},
		{RunnerStatusSignal{Online: true}, RunnerBusy, false},
		{RunnerStatusSignal{Online: true}, RunnerPending, false},
		{RunnerStatusSignal{}, RunnerIdle, false},
		{RunnerStatusSignal{Gone: true}, RunnerBusy, false},
	} {
		if got := tc.status.toldBy(tc.state); got != tc.told {
			t.Errorf("%+v told by a runner that reported %s = %v, want %v", tc.status, tc.state, got, tc.told)
		}
	}
}

// startLikeAPool starts a runner as its pool does: a child with RunnerState and RunnerPool set
// (the test environment applies start search attributes to children only).
func startLikeAPool(ctx workflow.Context, in RunnerInput) (RunnerResult, error) {
	opts := RunnerChildPolicy(RunnerWorkflowID(in.Pool, in.Name))
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(
		SearchAttrRunnerState.ValueSet(string(RunnerPending)), SearchAttrPool.ValueSet(in.Pool))
	var res RunnerResult
	err := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), RunnerWorkflowType, in).Get(ctx, &res)
	return res, err
}

// A registration whose pod fails for good (a pod of that name belongs to someone else) hands its
// registration back in the error, and the failed runner removes it.
func TestRunnerRemovesTheRegistrationWhosePodFailed(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(RegisterRunnerOutput{},
		temporal.NewNonRetryableApplicationError("pod exists and belongs to someone else", ErrNotOwned, nil,
			RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid"})).Once()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 7, Name: runnerTestName}).
		Return(RemoveRunnerOutput{Removed: true}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	_, err := h.run(runnerTestInput(true))
	if err == nil || appErrorType(err) != ErrRunnerFailed {
		t.Fatalf("workflow error = %v, want a %s failure", err, ErrRunnerFailed)
	}
	if got, want := h.callOrder(), []string{ActivityRegisterRunner, ActivityRemoveRunner, ActivityDeleteRunnerSecret}; !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// A runner drained while its pod was starting may run a job during its cleanup (GitHub refuses
// the removal while it is busy): the final report names that job, so its pool ends the job's
// reservation instead of keeping capacity for a job already run.
func TestRunnerFinalReportNamesTheJobItRanDuringCleanup(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.ownedRegistered(7, "uid-1")
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).After(30*time.Second).Return(RemoveRunnerOutput{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(1*time.Second, SignalDrain, DrainRequest{Reason: "scale down"})
	h.at(5*time.Second, SignalJobStarted, jobSig(700))
	h.at(20*time.Second, SignalJobCompleted, jobSig(700))
	h.mustRun(runnerTestInput(true))
	last := h.reports[len(h.reports)-1]
	if last.State != RunnerDone || last.EndedJob != 700 {
		t.Errorf("final report %+v, want done naming job 700", last)
	}
}
