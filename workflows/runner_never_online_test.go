package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
)

// A runner registered at GitHub whose runner never connected ends at its registration check:
// it removes its registration, deletes its Secret (its pod goes with it) and reports failed to
// its pool, saying it never came online. It registers no other runner: that is its pool's call.
func TestRunnerNeverOnlineEndsAndLeavesTheReplacementToItsPool(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.ownedRegistered(7, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7}, nil).Once()
	h.removes(1)
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	_, err := h.run(runnerTestInput(true))
	if appErrorType(err) != ErrRunnerFailed || !strings.Contains(err.Error(), NeverOnlineReason+": registered at GitHub but never connected") {
		t.Fatalf("workflow error = %v, want a %s failure saying the runner never came online", err, ErrRunnerFailed)
	}
	want := []string{ActivityRegisterRunner, ActivityGetRunnerPod, ActivityGetRunner, ActivityRemoveRunner, ActivityDeleteRunnerSecret}
	if got := h.callOrder(); !slices.Equal(got, want) {
		t.Errorf("activity calls = %v, want %v (one registration; the pod goes with its Secret)", got, want)
	}
	last := h.reports[len(h.reports)-1]
	if last.State != RunnerFailed || !strings.HasPrefix(last.Reason, NeverOnlineReason+": ") || last.Busy {
		t.Errorf("final report %+v, want failed, not busy, with a reason beginning %q", last, NeverOnlineReason)
	}
}

// The verdicts at the registration check, end to end: only never-online ends the runner as a
// failure; GitHub unreadable asks again, a registration gone while the pod runs ends it done,
// and a pod that never started with nothing at GitHub ends it failed with nothing to remove.
func TestRunnerRegistrationCheckOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pod     GetRunnerPodOutput
		github  GetRunnerOutput
		removes int
		failed  bool
		reason  string
	}{
		{name: "pod never started, not at GitHub", pod: GetRunnerPodOutput{Exists: true, Phase: PodPending},
			github: GetRunnerOutput{}, failed: true, reason: NeverOnlineReason + ": pod never started and GitHub has no registration"},
		{name: "pod never started, registered", pod: GetRunnerPodOutput{Exists: true, Phase: PodPending},
			github: GetRunnerOutput{Found: true, RunnerID: 7}, removes: 1, failed: true, reason: NeverOnlineReason + ": pod never started"},
		{name: "pod runs, registration gone", pod: GetRunnerPodOutput{Exists: true, Phase: PodRunning},
			github: GetRunnerOutput{}, reason: "runner no longer registered at GitHub while its pod runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRunnerHarness(t).withPool()
			h.ownedRegistered(7, "uid-1")
			h.podChecks(tc.pod)
			h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(tc.github, nil).Once()
			if tc.removes > 0 {
				h.removes(tc.removes)
			}
			h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
			res, err := h.run(runnerTestInput(true))
			if got := appErrorType(err) == ErrRunnerFailed; got != tc.failed {
				t.Fatalf("workflow error = %v, want failed %v", err, tc.failed)
			}
			last := h.reports[len(h.reports)-1]
			if !strings.HasPrefix(last.Reason, tc.reason) {
				t.Errorf("final report %+v (result %+v), want a reason beginning %q", last, res, tc.reason)
			}
			if n := countCalls(h.callOrder(), ActivityRegisterRunner); n != 1 {
				t.Errorf("%d registrations, want 1", n)
			}
		})
	}
}

// A runner handed a warm registration whose pod never brings it online removes that
// registration and ends; the pool decides what comes next.
func TestRunnerWithWarmRegistrationNeverOnlineEnds(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.Anything).Return(CreateRunnerPodOutput{UID: "uid-1"}, nil).Once()
	h.env.OnActivity(ActivitySetSecretOwner, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	ref := RunnerRef{Scope: Scope{Organization: "acme"}, RunnerID: 9, Name: runnerTestName}
	h.env.OnActivity(ActivityGetRunner, mock.Anything, ref).Return(GetRunnerOutput{Found: true, RunnerID: 9}, nil).Once()
	h.env.OnActivity(ActivityRemoveRunner, mock.Anything, ref).Return(RemoveRunnerOutput{Removed: true}, nil).Once()
	h.deletes(1)
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	if _, err := h.run(warmRunnerInput()); appErrorType(err) != ErrRunnerFailed {
		t.Fatalf("workflow error = %v, want %s", err, ErrRunnerFailed)
	}
	if n := countCalls(h.callOrder(), ActivityRegisterRunner); n != 0 {
		t.Errorf("%d registrations, want none (the warm one was its only)", n)
	}
}

func TestCountsAsNewFailure(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	backoffEnd := t0.Add(40 * time.Second)
	for _, tc := range []struct {
		name      string
		failures  int
		startedAt time.Time
		want      bool
	}{
		{"first failure in a row", 0, t0, true},
		{"first after a reset, started long ago", 0, t0.Add(-time.Hour), true},
		{"started before the backoff in force passed: failed with the last one", 1, t0, false},
		{"started just before the backoff ended", 3, backoffEnd.Add(-time.Millisecond), false},
		{"started when the backoff ended: failed again", 1, backoffEnd, true},
		{"started after the backoff", 2, backoffEnd.Add(time.Minute), true},
	} {
		if got := countsAsNewFailure(tc.failures, tc.startedAt, backoffEnd); got != tc.want {
			t.Errorf("%s: countsAsNewFailure(%d, %v, %v) = %v, want %v", tc.name, tc.failures, tc.startedAt, backoffEnd, got, tc.want)
		}
	}
}

// Runners that fail together (a burst that never came online through one outage) back the
// pool off once: their replacements start 30 s later, not after a backoff doubled per runner.
// A replacement that fails again doubles it.
func TestPoolRunnersFailingTogetherBackOffOnce(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		poolRunnersFailingTogether(t, canAfter)
	}
}

func poolRunnersFailingTogether(t *testing.T, canAfter int) {
	h := newPoolHarness(t, canAfter)
	spec := poolTestSpec()
	spec.MinReplicas = 5
	h.failRegistration = true
	h.at(90*time.Second, func() { h.failRegistration = false })
	// All five start at 0 and fail at 10s: backoff 30s. Their replacements start at 40s and
	// fail at 50s: backoff 1m, so the next five start at 110s and come online.
	h.check(35*time.Second, "held 30s after the five failed together", func(st PoolStatus) bool {
		return len(st.Runners) == 0 && strings.Contains(st.Why, "starts held until")
	})
	h.check(45*time.Second, "five replacements started after 30s", func(st PoolStatus) bool { return len(st.Runners) == 5 })
	h.check(100*time.Second, "held a minute after the replacements failed together", func(st PoolStatus) bool {
		return len(st.Runners) == 0
	})
	h.check(150*time.Second, "five runners online", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 5 })
	end := h.run(spec, 3*time.Minute)
	if end.Totals.Failed != 10 || end.Totals.Started != 15 {
		t.Errorf("[continue-as-new after %d] totals %+v, want 10 failed, 15 started", canAfter, end.Totals)
	}
}
