package poolcli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

func TestDecideCause(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	max := func(n int) *int { return &n }
	pool := func(edit func(*workflows.PoolStatus)) *workflows.PoolStatus {
		p := &workflows.PoolStatus{Name: "linux", Mode: workflows.PoolActive, Bounds: workflows.Bounds{Max: 2},
			Spec: workflows.PoolSpec{MaxReplicas: max(2)}, RunnersByState: map[workflows.RunnerState]int{}, Why: "demand 1"}
		if edit != nil {
			edit(p)
		}
		return p
	}
	busy := []workflows.PoolRunner{{Name: "a", State: workflows.RunnerBusy}, {Name: "b", State: workflows.RunnerBusy}}
	held := &workflows.Reservation{JobID: 7}
	runner := func(st workflows.RunnerStatus, a *PendingActivity) *RunnerFacts {
		st.Name = "linux-1"
		return &RunnerFacts{Status: st, Activity: a, Started: t0}
	}
	tests := []struct {
		name   string
		facts  WhyFacts
		cause  Cause
		detail string
	}{
		{"running on its runner", WhyFacts{Running: true, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{JobID: 7}, nil)}, CauseNone, "running on linux-1"},
		{"no pool holds it, none recorded", WhyFacts{Pools: 2}, CauseNotReceived, "never reached the intake"},
		{"no pools at all", WhyFacts{}, CauseNoPoolExists, "no pool"},
		{"a pull pool holds no job by id", WhyFacts{Pools: 1, Pulled: []PulledPool{{Pool: "pulled", At: t0, Queued: 3}}},
			CauseNotReceived, "pool pulled reads its demand by pull and holds no job by id (last read 10:00:00Z: 3 queued)"},
		{"unmatched, with the closest pool", WhyFacts{Pools: 1,
			Unmatched:  &workflows.UnmatchedJob{JobID: 7, Labels: []string{"self-hosted", "gpu"}, Repository: "acme/app", At: t0},
			NearMisses: []NearMiss{{Pool: "linux", Missing: []string{"gpu"}}}}, CauseNoPool, "pool linux lacks [gpu]"},
		{"paused", WhyFacts{Reservation: held, Pool: pool(func(p *workflows.PoolStatus) { p.Mode, p.ModeReason = workflows.PoolPaused, "incident" })}, CausePaused, "paused (incident)"},
		{"quota full", WhyFacts{Reservation: held, Pool: pool(func(p *workflows.PoolStatus) {
			p.Blocked = []workflows.PoolBlock{{Reason: workflows.BlockQuota, Runners: 3, Since: t0, Message: "exceeded quota"}}
		})}, CauseQuota, "3 runner pod(s) refused since 10:00:00Z"},
		{"budget at its reserve", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{},
			&PendingActivity{Type: workflows.ActivityRegisterRunner, Started: false, Attempt: 2, FailureType: workflows.ErrRateLimited,
				Failure: "GitHub API budget down to its reserve (5 left, 1000 kept back)", NextAttempt: t0.Add(40 * time.Minute)})},
			CauseBudget, "at its reserve until 10:40:00Z"},
		{"secondary limit", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{},
			&PendingActivity{Type: workflows.ActivityRegisterRunner, Attempt: 2, FailureType: workflows.ErrRateLimited, Failure: "secondary rate limit"})},
			CausePace, "rate limit"},
		{"waits for the task queue's pace", WhyFacts{Now: t0.Add(time.Minute), Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{},
			&PendingActivity{Type: workflows.ActivityRegisterRunner, Attempt: 1, Scheduled: t0})}, CausePace, "per-minute pace"},
		{"just scheduled is no wait", WhyFacts{Now: t0.Add(time.Second), Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{State: workflows.RunnerPending},
			&PendingActivity{Type: workflows.ActivityRegisterRunner, Attempt: 1, Scheduled: t0})}, CauseStarting, "pending"},
		{"an ending runner's removal is not the job's wait", WhyFacts{Now: t0.Add(time.Minute), Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{State: workflows.RunnerDraining},
			&PendingActivity{Type: workflows.ActivityRemoveRunner, Attempt: 1, Scheduled: t0})}, CauseStarting, "draining"},
		{"a started registration is no wait", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{State: workflows.RunnerRegistering},
			&PendingActivity{Type: workflows.ActivityRegisterRunner, Started: true, Attempt: 1})}, CauseStarting, "registering"},
		{"quota refusal seen on the runner", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{},
			&PendingActivity{Type: workflows.ActivityCreateRunnerPod, Attempt: 3, FailureType: workflows.ErrQuotaExceeded, Failure: "exceeded quota: runners"})},
			CauseQuota, "exceeded quota"},
		{"cluster unreachable", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{},
			&PendingActivity{Type: workflows.ActivityCreateRunnerPod, Started: true, Attempt: 4, Failure: "dial tcp 10.0.0.1:6443: connect: connection refused"})},
			CauseUnreachable, "connection refused"},
		{"no worker serves the cluster", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{},
			&PendingActivity{Type: workflows.ActivityCreateRunnerPod, Attempt: 3, FailureType: "Timeout", Failure: "timeout TIMEOUT_TYPE_SCHEDULE_TO_START"})},
			CauseUnreachable, "does not answer"},
		{"pod pending with its own reason", WhyFacts{Reservation: held, Pool: pool(nil), Runner: &RunnerFacts{
			Status: workflows.RunnerStatus{Name: "linux-1", PodCreatedAt: t0}, PodRead: true, PodWaiting: "container runner ImagePullBackOff: back-off"}},
			CausePodPending, "ImagePullBackOff"},
		{"pod pending with the watcher's reason", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{PodPhase: workflows.PodPending, PodReason: "SchedulingGated", PodCreatedAt: t0}, nil)},
			CausePodPending, "SchedulingGated"},
		{"pod created, not read", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{PodCreatedAt: t0}, nil)},
			CauseNotOnline, "since its pod was created at 10:00:00Z (pass --kubeconfig"},
		{"pod created, read, no reason", WhyFacts{Reservation: held, Pool: pool(nil), Runner: &RunnerFacts{PodRead: true,
			Status: workflows.RunnerStatus{Name: "linux-1", PodCreatedAt: t0}}}, CauseNotOnline, "gives no reason"},
		{"pod running, runner not online", WhyFacts{Reservation: held, Pool: pool(nil), Runner: runner(workflows.RunnerStatus{PodPhase: workflows.PodRunning, PodCreatedAt: t0}, nil)},
			CauseNotOnline, "not come online since 10:00:00Z"},
		{"at max, all busy", WhyFacts{Reservation: held, Pool: pool(func(p *workflows.PoolStatus) { p.Runners = busy })}, CauseAtMax, "at its maximum (2"},
		{"override holds it down", WhyFacts{Reservation: held, Pool: pool(func(p *workflows.PoolStatus) {
			p.Runners, p.OverrideActive, p.Bounds.Max, p.Spec.MaxReplicas = busy, true, 2, max(10)
		})}, CauseOverride, "scheduled override holds pool linux at max 2 (spec 10)"},
		{"idle runner not yet handed the job", WhyFacts{Reservation: held, Pool: pool(func(p *workflows.PoolStatus) {
			p.Runners = []workflows.PoolRunner{{Name: "a", State: workflows.RunnerIdle}}
			p.RunnersByState[workflows.RunnerIdle] = 1
		})}, CauseUnassigned, "1 idle runner"},
		{"pool not decided yet", WhyFacts{Reservation: held, Pool: pool(nil)}, CauseScaling, "demand 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := decideCause(tt.facts)
			if v.Cause != tt.cause || !strings.Contains(v.Detail, tt.detail) {
				t.Errorf("got %q (%s), want %q with %q", v.Cause, v.Detail, tt.cause, tt.detail)
			}
		})
	}
}

// The pool's gauge of waiting jobs counts by causes `why` also names, so one word means one
// thing in both.
func TestGaugeCausesAreWhyCauses(t *testing.T) {
	known := []Cause{CausePaused, CauseQuota, CauseStarting, CauseNotOnline, CauseUnassigned, CauseAtMax, CauseOverride, CauseScaling}
	for _, c := range workflows.WaitCauses {
		if !slices.Contains(known, Cause(c)) {
			t.Errorf("gauge cause %q is not a cause starter why names", c)
		}
	}
}

// A running job's verdict says when its runner was there before the job was queued, in a
// pool that prewarms: warmed for it from its run's graph, or a runner the pool had anyway.
func TestWhySaysARunnerWasWarmedAhead(t *testing.T) {
	queued := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	prewarming := &workflows.PoolStatus{Name: "linux", Spec: workflows.PoolSpec{Prewarm: &workflows.PrewarmSpec{Enabled: true}}}
	plain := &workflows.PoolStatus{Name: "linux"}
	predicted := &workflows.PrewarmedJob{JobID: 7, Job: "build", Repository: "acme/app", RunID: 123,
		WarmedAt: queued.Add(-5 * time.Second), Queued: queued.Add(time.Second)}
	runner := func(started time.Time) *RunnerFacts {
		return &RunnerFacts{WorkflowID: "runner/linux/linux-1", Started: started, Status: workflows.RunnerStatus{Name: "linux-1", JobID: 7}}
	}
	tests := []struct {
		name   string
		facts  WhyFacts
		detail string
	}{
		{"warmed for it", WhyFacts{Running: true, Pool: prewarming, QueuedAt: queued, Prewarmed: predicted, Runner: runner(queued.Add(-4200 * time.Millisecond))},
			"running on linux-1; started on a runner warmed 4.2 s before it was queued (predicted from run 123's graph)"},
		{"warmed for it, queued time from the prediction", WhyFacts{Running: true, Pool: prewarming, Prewarmed: predicted, Runner: runner(queued.Add(-4200 * time.Millisecond))},
			"running on linux-1; started on a runner warmed 5.2 s before it was queued (predicted from run 123's graph)"},
		{"there before it, not predicted", WhyFacts{Running: true, Pool: prewarming, QueuedAt: queued, Runner: runner(queued.Add(-time.Minute))},
			"running on linux-1; started on a runner that started 60.0 s before it was queued, not warmed for this job (the pool holds no prediction of it)"},
		{"predicted, but its runner came after it was queued", WhyFacts{Running: true, Pool: prewarming, QueuedAt: queued, Prewarmed: predicted, Runner: runner(queued.Add(time.Second))},
			"running on linux-1"},
		{"a pool that does not prewarm says nothing of it", WhyFacts{Running: true, Pool: plain, QueuedAt: queued, Runner: runner(queued.Add(-time.Minute))},
			"running on linux-1"},
		{"queued time unknown", WhyFacts{Running: true, Pool: prewarming, Runner: runner(queued.Add(-time.Minute))}, "running on linux-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := decideCause(tt.facts); v.Cause != CauseNone || v.Detail != tt.detail {
				t.Errorf("got %q (%s), want not waiting: %s", v.Cause, v.Detail, tt.detail)
			}
		})
	}
	// Its path shows when the pool began warming for it, and when it was queued.
	var steps []string
	for _, s := range whyPath(tests[0].facts) {
		steps = append(steps, clock(s.At)+" "+s.What)
	}
	want := []string{"09:59:55Z pool linux began warming runners for build, predicted from acme/app run 123's graph",
		"09:59:55Z runner workflow runner/linux/linux-1 started", "10:00:00Z delivery received (queued event)"}
	if !slices.Equal(steps, want) {
		t.Errorf("path %q, want %q", steps, want)
	}
}
