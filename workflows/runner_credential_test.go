package workflows

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Tests of changeSecretAfterScheduling: a JIT runner's pod comes first, its Secret is written
// once the pod is scheduled and deleted once the runner started.

func podScheduled(uid string) PodStatusSignal {
	return PodStatusSignal{Pod: runnerTestName, UID: uid, Phase: PodPending, Scheduled: true}
}

// podFirst mocks the pod created before its Secret: named after the runner, owned by nothing,
// marked for the pod watcher.
func (h *runnerHarness) podFirst(uid string) {
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.MatchedBy(func(in CreateRunnerPodInput) bool {
		return in.SecretAfterScheduling && in.SecretName == runnerTestName && in.SecretUID == ""
	})).Return(CreateRunnerPodOutput{UID: uid}, nil).Once()
}

// A cold runner registers only once its pod is scheduled (the JIT configuration is minted into
// the Secret then), deletes its Secret once its pod runs, and deletes its pod at its end: four
// Kubernetes writes, the Secret alive from scheduling to start.
func TestRunnerPodFirstWritesItsSecretOnlyBetweenSchedulingAndStart(t *testing.T) {
	h := newPodFirstHarness(t).withPool()
	h.podFirst("uid-1")
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.MatchedBy(func(in RegisterRunnerInput) bool {
		return in.Pod == nil && in.Name == runnerTestName && in.Namespace == runnerTestNS
	})).Return(RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid"}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, PodRef{Namespace: runnerTestNS, Name: runnerTestName, UID: "uid-1"}).Return(Nothing{}, nil).Once()
	// Held unscheduled for a minute: nothing is registered meanwhile.
	h.at(time.Minute, SignalPodStart, podScheduled("uid-1"))
	h.at(time.Minute+time.Second, SignalPodStart, podRunning("uid-1"))
	h.at(time.Minute+2*time.Second, SignalJobStarted, jobSig(100))
	h.at(time.Minute+3*time.Second, SignalJobCompleted, jobSig(100))
	res := h.mustRun(runnerTestInput(true))
	if res.FinalState != RunnerDone || res.RunnerID != 7 || res.JobsRun != 1 {
		t.Errorf("result %+v, want done with runner 7 and one job", res)
	}
	want := []string{ActivityCreateRunnerPod, ActivityRegisterRunner, ActivityDeleteRunnerSecret, ActivityDeleteRunnerPod}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// The runner connecting (a listing, or its job starting) retires the Secret as well, should the
// pod's start not have been heard of first; a duplicate start changes nothing.
func TestRunnerPodFirstRetiresItsSecretWhenItsRunnerConnects(t *testing.T) {
	h := newPodFirstHarness(t).withPool()
	h.podFirst("uid-1")
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(
		RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid"}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStart, podScheduled("uid-1"))
	h.at(2*time.Second, SignalRunnerStatus, onlineSig)
	h.at(3*time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(4*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	h.mustRun(runnerTestInput(true))
	want := []string{ActivityCreateRunnerPod, ActivityRegisterRunner, ActivityDeleteRunnerSecret, ActivityDeleteRunnerPod}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// A warm registration kept apart is copied into the runner's namespace only once the pod is
// scheduled, and leaves it when the runner started.
func TestRunnerPodFirstCopiesItsWarmRegistrationOnceScheduled(t *testing.T) {
	h := newPodFirstHarness(t).withPool()
	in := warmRunnerInput()
	in.Warm.SecretNamespace, in.Warm.SecretName = "runnerflow-warm", "warm-1"
	h.podFirst("uid-1")
	h.env.OnActivity(ActivityCopyWarmSecret, mock.Anything, CopyWarmSecretInput{
		Secret: SecretRef{Namespace: runnerTestNS, Name: runnerTestName}, Pool: runnerTestPool,
		WorkflowID: RunnerWorkflowID(runnerTestPool, runnerTestName), Warm: SecretRef{Namespace: "runnerflow-warm", Name: "warm-1"},
	}).Return(CopyWarmSecretOutput{SecretName: runnerTestName, SecretUID: "own-uid"}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStart, podScheduled("uid-1"))
	h.at(2*time.Second, SignalPodStart, podRunning("uid-1"))
	h.at(3*time.Second, SignalJobStarted, jobSig(100))
	h.at(4*time.Second, SignalJobCompleted, jobSig(100))
	res := h.mustRun(in)
	if res.RunnerID != 9 || res.JobsRun != 1 {
		t.Errorf("result %+v, want the warm registration's runner 9 with one job", res)
	}
	want := []string{ActivityCreateRunnerPod, ActivityCopyWarmSecret, ActivityDeleteRunnerSecret, ActivityDeleteRunnerPod}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// A pod that goes before it was ever scheduled took no credential: the runner deletes the pod
// and registered nothing, so there is nothing to unregister and no Secret to delete.
func TestRunnerPodFirstThatNeverScheduledRegistersNothing(t *testing.T) {
	h := newPodFirstHarness(t).withPool()
	h.podFirst("uid-1")
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Minute, SignalPodStatus, podSig("uid-1", PodGone, ""))
	h.mustRun(runnerTestInput(true))
	if got, want := h.callOrder(), []string{ActivityCreateRunnerPod, ActivityDeleteRunnerPod}; !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// Still unscheduled at its registration timeout, a cold runner ends as one whose pod never
// started, without asking GitHub (it has no registration); a missed scheduling signal is caught
// by the same check's pod read.
func TestRunnerPodFirstAtItsRegistrationTimeout(t *testing.T) {
	t.Run("unscheduled", func(t *testing.T) {
		h := newPodFirstHarness(t).withPool()
		h.podFirst("uid-1")
		h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodPending})
		h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
		_, err := h.run(runnerTestInput(true))
		if appErrorType(err) != ErrRunnerFailed {
			t.Fatalf("error %v, want %s", err, ErrRunnerFailed)
		}
		if n := countCalls(h.callOrder(), ActivityGetRunner) + countCalls(h.callOrder(), ActivityRegisterRunner); n != 0 {
			t.Errorf("%d GitHub calls for a runner never scheduled, want none: %v", n, h.callOrder())
		}
	})
	t.Run("scheduled, signal missed", func(t *testing.T) {
		h := newPodFirstHarness(t).withPool()
		h.podFirst("uid-1")
		h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodPending, Scheduled: true})
		h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(
			RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid"}, nil).Once()
		h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
		h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
		h.at(DefaultRegistrationTimeout+time.Minute, SignalPodStatus, podRunning("uid-1"))
		h.at(DefaultRegistrationTimeout+2*time.Minute, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
		h.mustRun(runnerTestInput(true))
		want := []string{ActivityCreateRunnerPod, ActivityGetRunnerPod, ActivityRegisterRunner, ActivityDeleteRunnerSecret, ActivityDeleteRunnerPod}
		if got := slices.DeleteFunc(h.callOrder(), func(c string) bool { return c == ActivityGetRunnerPod }); !slices.Equal(got, slices.DeleteFunc(want, func(c string) bool { return c == ActivityGetRunnerPod })) {
			t.Errorf("activity calls = %v, want %v (pod reads aside)", h.callOrder(), want)
		}
	})
}

// Histories before the change write the Secret first, the pod owned by it (one activity), and
// end with the Secret's deletion alone.
func TestRunnerBeforeSecretAfterSchedulingWritesItsSecretFirst(t *testing.T) {
	h := newPodFirstHarness(t).withPool().before(changeSecretAfterScheduling)
	h.ownedRegistered(7, "uid-1")
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(2*time.Second, SignalJobStarted, jobSig(100))
	h.at(3*time.Second, SignalJobCompleted, jobSig(100))
	h.mustRun(runnerTestInput(true))
	if got, want := h.callOrder(), []string{ActivityRegisterRunner, ActivityDeleteRunnerSecret}; !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// The runner's cluster stops answering while the runner writes its credential into its
// Secret: the step gives up after ClusterLostAfter (the Kubernetes and GitHub policies would
// retry for hours), the runner reads its pod, and leaves the lost cluster as any runner that
// never connected, for its pool to place another elsewhere. A registration GitHub made before
// the Secret's write stopped answering is found by name and removed; the pod is deleted once
// the cluster answers, and the Secret too, by its name, since its write may have reached the
// API server unheard (changeLostSecretByName; before it, the Secret was left behind).
func TestRunnerPodFirstLeavesAClusterLostMidCredential(t *testing.T) {
	for _, gated := range []bool{true, false} {
		t.Run(fmt.Sprintf("secret by name %v", gated), func(t *testing.T) {
			h := newPodFirstHarness(t).withPool()
			if !gated {
				h.env.OnGetVersion(changeLostSecretByName, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			h.podFirst("uid-1")
			timeout := temporal.NewApplicationError("context deadline exceeded", "Timeout")
			h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(RegisterRunnerOutput{}, timeout)
			h.env.OnActivity(ActivityGetRunnerPod, mock.Anything, mock.Anything).Return(GetRunnerPodOutput{}, timeout)
			// GitHub had registered the runner before the Secret's write stopped answering: it is
			// found by name and removed.
			h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7}, nil)
			h.removes(1)
			h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, PodRef{Cluster: "a", Namespace: runnerTestNS, Name: runnerTestName, UID: "uid-1"}).
				Return(Nothing{}, nil).Once()
			if gated {
				h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Cluster: "a", Namespace: runnerTestNS, Name: runnerTestName}).
					Return(Nothing{}, nil).Once()
			}
			h.at(time.Second, SignalPodStart, podScheduled("uid-1"))
			in := runnerTestInput(true)
			in.Cluster = "a"
			_, err := h.run(in)
			if appErrorType(err) != ErrRunnerFailed || !strings.Contains(err.Error(), ClusterLostReason) {
				t.Fatalf("workflow error = %v, want a %s failure naming the lost cluster", err, ErrRunnerFailed)
			}
			want := []string{ActivityDeleteRunnerPod}
			if gated {
				want = append(want, ActivityDeleteRunnerSecret)
			}
			calls := h.callOrder()
			if got := calls[len(calls)-len(want):]; !slices.Equal(got, want) || (!gated && slices.Contains(calls, ActivityDeleteRunnerSecret)) {
				t.Errorf("activity calls = %v, want them to end with %v", calls, want)
			}
		})
	}
}

// A scale set's runner registers into its Secret at its set, under a policy bounded as the REST
// registration's (the set's own retries for an hour). The set may have made the runner before
// the Secret's write failed for good (another workflow's Secret): the id never reached the
// workflow, so the runner's end removes the set's runner of its name.
func TestScaleSetRunnerPodFirstRemovesByNameARegistrationWithoutItsID(t *testing.T) {
	h := newPodFirstHarness(t).withPool()
	registerRunnerStub[CreateScaleSetRunnerInput, CreateScaleSetRunnerOutput](h, ActivityCreateScaleSetRunner)
	registerRunnerStub[RemoveScaleSetRunnerInput, RemoveScaleSetRunnerOutput](h, ActivityRemoveScaleSetRunner)
	h.podFirst("uid-1")
	notOwned := temporal.NewNonRetryableApplicationError("secret owned by another workflow", ErrNotOwned, nil)
	h.env.OnActivity(ActivityCreateScaleSetRunner, mock.Anything, mock.MatchedBy(func(in CreateScaleSetRunnerInput) bool {
		return in.PodFirst && in.ScaleSetID == 5
	})).Return(CreateScaleSetRunnerOutput{}, notOwned).Once()
	h.env.OnActivity(ActivityRemoveScaleSetRunner, mock.Anything, RemoveScaleSetRunnerInput{
		Scope: Scope{Organization: "acme"}, Name: runnerTestName, ScaleSetID: 5,
	}).Return(RemoveScaleSetRunnerOutput{Removed: true}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStart, podScheduled("uid-1"))
	in := runnerTestInput(true)
	in.Spec.ScaleSetID = 5
	if _, err := h.run(in); appErrorType(err) != ErrRunnerFailed {
		t.Fatalf("workflow error = %v, want %s", err, ErrRunnerFailed)
	}
	want := []string{ActivityCreateRunnerPod, ActivityCreateScaleSetRunner, ActivityRemoveScaleSetRunner, ActivityDeleteRunnerPod}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v", got, want)
	}
}

// The credential window's registration steps give up when a lost cluster is declared, at
// GitHub and at a scale set alike.
func TestCredentialRegistrationsAreBoundedByTheClusterLostVerdict(t *testing.T) {
	for name, p := range map[string]workflow.ActivityOptions{
		"rest": CredentialRegistrationPolicy, "scale set": CredentialScaleSetRegistrationPolicy,
	} {
		if p.ScheduleToCloseTimeout != ClusterLostAfter {
			t.Errorf("%s: schedule-to-close %v, want ClusterLostAfter (%v)", name, p.ScheduleToCloseTimeout, ClusterLostAfter)
		}
	}
	if CredentialScaleSetRegistrationPolicy.TaskQueue != ScaleSetActivityPolicy.TaskQueue {
		t.Errorf("the scale set's credential registration runs on %q, want the set's queue %q",
			CredentialScaleSetRegistrationPolicy.TaskQueue, ScaleSetActivityPolicy.TaskQueue)
	}
}

// A registration refused at GitHub's budget reserve is no longer a pending activity: the runner
// reports the step waiting, with the budget's reset, in its status (what `starter why` reads)
// until the step is taken up again and succeeds.
func TestRunnerPodFirstReportsItsCredentialStepWaiting(t *testing.T) {
	h := newPodFirstHarness(t).withPool()
	h.podFirst("uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodPending, Scheduled: true})
	refused := temporal.NewApplicationErrorWithOptions("GitHub API budget down to its reserve", ErrRateLimited,
		temporal.ApplicationErrorOptions{NextRetryDelay: 20 * time.Minute})
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(RegisterRunnerOutput{}, refused).Once()
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(
		RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid"}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStart, podScheduled("uid-1"))
	status := func() RunnerStatus {
		v, err := h.env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Fatal(err)
		}
		var st RunnerStatus
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	var waiting, after *StepWait
	var scheduledAt time.Time
	h.env.RegisterDelayedCallback(func() { waiting, scheduledAt = status().CredentialWait, h.env.Now() }, 2*time.Minute)
	h.at(DefaultRegistrationTimeout+2*time.Minute, SignalPodStatus, podRunning("uid-1"))
	h.env.RegisterDelayedCallback(func() { after = status().CredentialWait }, DefaultRegistrationTimeout+3*time.Minute)
	h.at(DefaultRegistrationTimeout+4*time.Minute, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	h.mustRun(runnerTestInput(true))
	if waiting == nil || waiting.Activity != ActivityRegisterRunner || waiting.FailureType != ErrRateLimited ||
		waiting.RetryAt.Before(scheduledAt.Add(15*time.Minute)) || !strings.Contains(waiting.Failure, "reserve") {
		t.Errorf("status while refused: credential wait %+v, want RegisterRunner waiting ~20 min for the budget", waiting)
	}
	if after != nil {
		t.Errorf("status once registered: credential wait %+v, want none", after)
	}
	if n := countCalls(h.callOrder(), ActivityRegisterRunner); n != 2 {
		t.Errorf("%d registrations, want the refused one and its retry: %v", n, h.callOrder())
	}
}
