package workflows

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
)

// The sequence of issue 24, case 1: a busy runner that one paginated listing skipped (GitHub
// removed other runners between two page reads) is told Gone by its pool. It asks GitHub by
// its id, hears it is still there and busy, and finishes its job; only then does its Secret
// (and with it its pod) go.
func TestRunnerSkippedByOneListingFinishesItsJob(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.ownedRegistered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	ref := RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 7, Name: runnerTestName}
	h.env.OnActivity(ActivityGetRunner, mock.Anything, ref).Return(GetRunnerOutput{Found: true, RunnerID: 7, Online: true, Busy: true}, nil).Once()
	var secretGoneAt time.Time
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once().
		Run(func(mock.Arguments) { secretGoneAt = h.env.Now() })
	var completedAt time.Time
	h.at(time.Second, SignalRunnerStatus, RunnerStatusSignal{Online: true, Busy: true})
	h.at(2*time.Second, SignalJobStarted, jobSig(100))
	h.at(3*time.Second, SignalRunnerStatus, RunnerStatusSignal{Gone: true})
	h.env.RegisterDelayedCallback(func() {
		completedAt = h.env.Now()
		h.env.SignalWorkflow(SignalJobCompleted, jobSig(100))
	}, 10*time.Minute)
	res := h.mustRun(runnerTestInput(true))
	if res.JobsRun != 1 || res.Reason != "job completed" {
		t.Errorf("result = %+v, want the runner to end after its one job", res)
	}
	if secretGoneAt.Before(completedAt) {
		t.Errorf("Secret deleted at %s, before the job completed at %s: the pod went mid-job", secretGoneAt, completedAt)
	}
	if n := countCalls(h.callOrder(), ActivityRemoveRunner); n != 0 {
		t.Errorf("%d removals; an ephemeral runner that finished its job has none to make", n)
	}
}

// A runner a listing no longer has, and that GitHub answers 404 for by id, is gone: it ends
// without a removal (GitHub has none to make).
func TestRunnerConfirmedGoneByIDEnds(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.ownedRegistered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalRunnerStatus, RunnerStatusSignal{Gone: true})
	res := h.mustRun(runnerTestInput(false))
	if res.Reason != "runner no longer registered at GitHub" {
		t.Errorf("reason = %q, want the registration gone", res.Reason)
	}
	if got, want := h.callOrder(), []string{ActivityRegisterRunner, ActivityGetRunner, ActivityDeleteRunnerSecret}; !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// An answer that did not come is asked again later, the runner carrying on; a later listing
// that has the runner withdraws the question.
func TestRunnerGoneQuestionAskedAgainOrWithdrawn(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.ownedRegistered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{},
		temporal.NewNonRetryableApplicationError("GitHub answered 502", "GitHubUnavailable", errors.New("502"))).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalRunnerStatus, RunnerStatusSignal{Gone: true})
	h.at(30*time.Second, SignalRunnerStatus, onlineSig)
	h.at(10*time.Minute, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	h.removes(1) // a persistent runner's registration outlives its pod
	res := h.mustRun(runnerTestInput(false))
	if res.Reason != EndReasonPodSucceeded {
		t.Errorf("reason = %q, want the runner to carry on until its pod ended", res.Reason)
	}
}

// A history written before changeConfirmGone ends on the listing's word, as it did.
func TestRunnerGoneBeforeConfirmationEndsOnTheListing(t *testing.T) {
	h := newRunnerHarness(t).withPool().before(changeConfirmGone)
	h.ownedRegistered(7, "uid-1")
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	h.at(2*time.Second, SignalRunnerStatus, RunnerStatusSignal{Gone: true})
	res := h.mustRun(runnerTestInput(false))
	if res.Reason != "runner no longer registered at GitHub" {
		t.Errorf("reason = %q", res.Reason)
	}
}
