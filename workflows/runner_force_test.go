package workflows

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
)

// forceCalls records the order of the force-remove path's activities.
type forceCalls struct {
	mu    sync.Mutex
	calls []string
}

func (f *forceCalls) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

func (f *forceCalls) order() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, ",")
}

// forceMocks mocks the force-remove path: the pod and Secret deletions, and an unregistration
// GitHub answers busy (422) busyAnswers times before it succeeds.
func forceMocks(h *runnerHarness, busyAnswers int) *forceCalls {
	f := &forceCalls{}
	h.env.OnActivity(ActivityDeleteRunnerPod, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once().
		Run(func(mock.Arguments) { f.add("pod") })
	if busyAnswers > 0 {
		busy := temporal.NewApplicationError("runner is still running a job", ErrRunnerBusy)
		h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Return(RemoveRunnerOutput{}, busy).
			Times(busyAnswers).Run(func(mock.Arguments) { f.add("busy") })
	}
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Return(RemoveRunnerOutput{Removed: true}, nil).Once().
		Run(func(mock.Arguments) { f.add("unregister") })
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once().
		Run(func(mock.Arguments) { f.add("secret") })
	return f
}

// forceCallback records a force-remove update's outcome.
type forceCallback struct {
	t        *testing.T
	rejected error
	result   *ForceRemoveResult
}

func (u *forceCallback) Accept()          {}
func (u *forceCallback) Reject(err error) { u.rejected = err }
func (u *forceCallback) Complete(v any, err error) {
	if err != nil {
		u.t.Errorf("force-remove update failed: %v", err)
		return
	}
	if u.result != nil {
		*u.result = v.(ForceRemoveResult)
	}
}

// A busy runner force-removed loses its pod first (GitHub answers 422 to removing a busy
// runner, and the job fails when the runner goes), then its registration, retried while
// GitHub still says busy, then its Secret; it ends with the operator's reason and tells its
// pool it is being removed.
func TestRunnerForceRemoveBusyRunner(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	calls := forceMocks(h, 2)
	h.at(time.Second, SignalJobStarted, jobSig(9))
	var accepted ForceRemoveResult
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdateForceRemove, "force-1", &forceCallback{t: t, result: &accepted}, ForceRemoveRequest{Reason: "job stuck for 3 days"})
	}, time.Hour)
	res := h.mustRun(runnerTestInput(false))
	if got := calls.order(); got != "pod,busy,busy,unregister,secret" {
		t.Errorf("force-remove calls = %s, want the pod first, the 422 retried, then the Secret", got)
	}
	if accepted != (ForceRemoveResult{State: RunnerDraining, Busy: true}) {
		t.Errorf("force-remove update answered %+v, want draining and busy", accepted)
	}
	if res.FinalState != RunnerDone || res.Reason != "force-removed: job stuck for 3 days" {
		t.Errorf("result = %+v, want done with the operator's reason", res)
	}
	var removing []RunnerState
	for _, rep := range h.reports {
		if rep.Removing {
			removing = append(removing, rep.State)
		}
	}
	if len(removing) != 2 || removing[0] != RunnerDraining || removing[1] != RunnerDone {
		t.Errorf("reports marked removing = %v, want draining then done", removing)
	}
}

// The pool forwards a force-remove as a signal; a runner already draining mid-job (waiting
// for its job) is removed at once and tells its pool again, now as removing.
func TestRunnerForceRemoveBySignalWhileDraining(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	calls := forceMocks(h, 0)
	h.at(time.Second, SignalJobStarted, jobSig(9))
	h.at(2*time.Second, SignalDrain, DrainRequest{Reason: "scale down"})
	h.at(time.Hour, SignalForceRemove, ForceRemoveRequest{Reason: "stuck"})
	res := h.mustRun(runnerTestInput(true))
	if got := calls.order(); got != "pod,unregister,secret" {
		t.Errorf("force-remove calls = %s", got)
	}
	if res.Reason != "force-removed: stuck" {
		t.Errorf("reason = %q, want the operator's", res.Reason)
	}
	last := h.reports[len(h.reports)-2]
	if last.State != RunnerDraining || !last.Removing || last.Reason != "force-removed: stuck" {
		t.Errorf("report before the end = %+v, want draining, removing, with the reason", last)
	}
}

// A force-remove without a reason is rejected and changes nothing; the runner lives on.
func TestRunnerForceRemoveNeedsAReason(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.registered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.removes(1)
	h.deletes(1)
	h.at(time.Second, SignalRunnerStatus, onlineSig)
	cb := &forceCallback{t: t}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdateForceRemove, "force-1", cb, ForceRemoveRequest{Reason: "  "})
	}, time.Minute)
	h.at(time.Hour, SignalPodStatus, podSig("uid-1", PodFailed, "Error"))
	res := h.mustRun(runnerTestInput(false))
	if cb.rejected == nil || !strings.Contains(cb.rejected.Error(), "a reason is required") {
		t.Errorf("rejected with %v, want a reason required", cb.rejected)
	}
	if res.Reason != "pod failed: Error" {
		t.Errorf("reason = %q, want the runner to run on until its pod failed", res.Reason)
	}
}

func TestRunnerForceRemoveValidator(t *testing.T) {
	r := &runner{in: RunnerInput{Name: "pool-a-ab12-1"}, state: RunnerBusy}
	if err := r.validateForceRemove(ForceRemoveRequest{Reason: "stuck"}); err != nil {
		t.Errorf("busy runner: %v, want accepted", err)
	}
	if err := r.validateForceRemove(ForceRemoveRequest{}); err == nil {
		t.Error("empty reason accepted")
	}
	r.state = RunnerDone
	if err := r.validateForceRemove(ForceRemoveRequest{Reason: "stuck"}); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("ended runner: %v, want already ended", err)
	}
}
