package poolcli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// A job waiting on a scale-set pool is judged from its place in the set: the set and its
// listener (no set, no listener, no session), an offer not acquired (no room, failing, next
// message), given to the set and on its way to the pool, assigned in the pool's ledger (the
// runner started for it, the pool's bounds), running, completed, or unknown to every set.
func TestDecideCauseOnScaleSets(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	set := func(edit func(*ScaleSetFacts)) ScaleSetFacts {
		s := ScaleSetFacts{Pool: "linux", SetName: "linux-x64", Labels: []string{"linux", "x64"},
			Set: workflows.PoolScaleSetState{ScaleSetID: 3, Listening: true, ListenerMax: 2, SessionID: "s1", MessageAt: t0,
				Ledger:     workflows.ScaleSetLedger{LastMessageID: 12},
				Statistics: workflows.ScaleSetStatistics{AssignedJobs: 1}},
			Listener: &ListenerFacts{WorkflowID: "scaleset-listener/linux/3"}}
		if edit != nil {
			edit(&s)
		}
		return s
	}
	pool := func(edit func(*workflows.PoolStatus)) *workflows.PoolStatus {
		two := 2
		p := &workflows.PoolStatus{Name: "linux", Mode: workflows.PoolActive, Bounds: workflows.Bounds{Max: 2},
			Spec: workflows.PoolSpec{MaxReplicas: &two}, RunnersByState: map[workflows.RunnerState]int{}, Why: "scale set: max(jobs 1, assigned 1)"}
		if edit != nil {
			edit(p)
		}
		return p
	}
	// holding is a job the set knows, at place.
	holding := func(place SetPlace, p *workflows.PoolStatus, edit func(*ScaleSetFacts)) WhyFacts {
		s := set(func(s *ScaleSetFacts) {
			s.Job.Place, s.Job.OfferedAt = place, t0
			if edit != nil {
				edit(s)
			}
		})
		return WhyFacts{Now: t0.Add(time.Minute), Pools: 1, Pool: p, ScaleSets: []ScaleSetFacts{s}, ScaleSet: &s}
	}
	// unknown is a job no set holds, with the sets given as the only pools.
	unknown := func(sets ...ScaleSetFacts) WhyFacts {
		return WhyFacts{Now: t0.Add(time.Minute), Pools: len(sets), ScaleSets: sets}
	}
	full := func(s *ScaleSetFacts) { s.Set.Statistics.AssignedJobs = 2 }
	busy := []workflows.PoolRunner{{Name: "linux-1", State: workflows.RunnerBusy}, {Name: "linux-2", State: workflows.RunnerBusy}}
	tests := []struct {
		name   string
		facts  WhyFacts
		cause  Cause
		detail string
	}{
		{"no set yet", unknown(set(func(s *ScaleSetFacts) {
			s.Set = workflows.PoolScaleSetState{Error: "runner group ci not found", RetryAt: t0}
		})), CauseSetNotListening, `pool linux has no scale set yet: runner group ci not found; tried again at 10:00:00Z`},
		{"no listener", unknown(set(func(s *ScaleSetFacts) {
			s.Set.Listening, s.Set.Error, s.Set.RetryAt, s.Listener = false, "listener ended: poll failed", t0, nil
		})), CauseSetNotListening, `scale set "linux-x64" (id 3) has no listener: listener ended: poll failed; tried again at 10:00:00Z`},
		{"listener workflow gone", unknown(set(func(s *ScaleSetFacts) { s.Listener.Closed = true })),
			CauseSetNotListening, "listener scaleset-listener/linux/3 is not running"},
		{"session refused", unknown(set(func(s *ScaleSetFacts) {
			s.Listener.Activities = []PendingActivity{{Type: workflows.ActivityOpenScaleSetSession, Attempt: 3,
				Failure: "409 session conflict", NextAttempt: t0.Add(2 * time.Minute)}}
		})), CauseSetNotListening, "has no session: opening one is at attempt 3 (409 session conflict); next try 10:02:00Z"},
		{"session's worker gone", unknown(set(func(s *ScaleSetFacts) {
			s.Listener.Activities = []PendingActivity{{Type: workflows.ActivityPollScaleSet, Attempt: 1, Scheduled: t0}}
		})), CauseSetNotListening, "waits since 10:00:00Z for the worker holding its session, which is gone"},
		{"a poll just scheduled is no wait", unknown(set(func(s *ScaleSetFacts) {
			s.Listener.Activities = []PendingActivity{{Type: workflows.ActivityPollScaleSet, Attempt: 1, Scheduled: t0.Add(59 * time.Second)}}
		})), CauseSetNotAssigned, "GitHub has not sent it"},
		{"offered, no room", holding(SetOffered, pool(nil), full), CauseSetOffered,
			`offered to scale set "linux-x64" (id 3) at 10:00:00Z, not acquired: the set has 2 assigned of its maximum 2`},
		{"offered, room", holding(SetOffered, pool(nil), nil), CauseSetOffered,
			"not acquired yet: the listener acquires it with the set's next message (1 assigned of its maximum 2)"},
		{"offered before the listener's run", holding(SetOffered, pool(nil), func(s *ScaleSetFacts) { s.Job.OfferCarried = true }),
			CauseSetOffered, "before 10:00:00Z, not acquired"},
		{"offered, acquisition failing", holding(SetOffered, pool(nil), func(s *ScaleSetFacts) {
			s.Job.Acquire = &Acquisition{At: t0, Outcome: AcquireFailed, Failure: "503 service unavailable"}
		}), CauseSetOffered, "acquiring it failed at 10:00:00Z (503 service unavailable)"},
		{"offered, acquisition under way", holding(SetOffered, pool(nil), func(s *ScaleSetFacts) {
			s.Job.Acquire = &Acquisition{At: t0, Outcome: AcquirePending}
		}), CauseSetOffered, "is acquiring it since 10:00:00Z"},
		{"offered, no session to acquire it", holding(SetOffered, pool(nil), func(s *ScaleSetFacts) {
			s.Listener.Activities = []PendingActivity{{Type: workflows.ActivityOpenScaleSetSession, Attempt: 2, Failure: "409"}}
		}), CauseSetNotListening, "not acquired: scale set \"linux-x64\" (id 3) has no session"},
		{"given, on its way to the pool", holding(SetAcquired, pool(nil), nil), CauseScaling, "the listener hands that message to pool linux next"},
		{"assigned, its runner starting", func() WhyFacts {
			f := holding(SetAssigned, pool(nil), nil)
			f.Runner = &RunnerFacts{Status: workflows.RunnerStatus{Name: "linux-7", State: workflows.RunnerRegistering}, Started: t0}
			return f
		}(), CauseStarting, `scale set "linux-x64" (id 3) has it assigned; runner linux-7 is registering`},
		{"assigned, its runner's pod pending", func() WhyFacts {
			f := holding(SetAssigned, pool(nil), nil)
			f.Runner = &RunnerFacts{Status: workflows.RunnerStatus{Name: "linux-7", PodPhase: workflows.PodPending, PodReason: "Unschedulable", PodCreatedAt: t0}}
			return f
		}(), CausePodPending, "has it assigned; runner linux-7's pod is Pending"},
		{"assigned, pool at its maximum", holding(SetAssigned, pool(func(p *workflows.PoolStatus) { p.Runners = busy }), nil),
			CauseAtMax, "has it assigned; pool linux is at its maximum (2 runners, all busy or starting); it waits for one of them to end"},
		{"assigned, pool paused", holding(SetAssigned, pool(func(p *workflows.PoolStatus) { p.Mode, p.ModeReason = workflows.PoolPaused, "incident" }), nil),
			CausePaused, "has it assigned; pool linux is paused (incident)"},
		{"assigned, pool deciding", holding(SetAssigned, pool(nil), nil), CauseScaling, "scale set: max(jobs 1, assigned 1)"},
		{"running", holding(SetRunning, pool(nil), func(s *ScaleSetFacts) { s.Job.Runner = "linux-9" }),
			CauseNone, `running on linux-9 (scale set "linux-x64" (id 3))`},
		{"completed", holding(SetCompleted, pool(nil), nil), CauseNone, "completed"},
		{"held with no place is judged as not held", holding(SetUnknown, pool(nil), full), CauseAtMax, "has 2 assigned of its maximum 2"},
		{"unknown, the set at its maximum", unknown(set(full)), CauseAtMax,
			"has 2 assigned of its maximum 2: GitHub assigns a set no more than its maximum, so the job waits at GitHub for one of them to end"},
		{"unknown, not sent yet", unknown(set(nil)), CauseSetNotAssigned,
			"GitHub has not sent it to scale set \"linux-x64\" (id 3) (last message 10:00:00Z, 1 assigned of its maximum 2)"},
		{"unknown, not given when acquired", unknown(set(func(s *ScaleSetFacts) {
			s.Job.Acquire = &Acquisition{At: t0, Outcome: AcquireNotGiven}
		})), CauseSetNotAssigned, "the service gave it to the set no more"},
		{"unknown, the set's waiting jobs named", unknown(set(func(s *ScaleSetFacts) { s.Set.Ledger.Waiting = []int64{5, 6} })),
			CauseSetNotAssigned, "it holds 2 job(s) no runner has started, by runner request id [5 6]"},
		{"unknown, sets disagree", unknown(set(full), set(func(s *ScaleSetFacts) { s.Pool, s.Set.Listening = "arm", false })),
			CauseSetNotAssigned, `; pool arm: scale set "linux-x64" (id 3) has no listener`},
		{"unknown, beside a webhook pool", WhyFacts{Now: t0, Pools: 2, ScaleSets: []ScaleSetFacts{set(full)}}, CauseNotReceived,
			"long ago; pool linux hears its jobs from its scale set: scale set \"linux-x64\" (id 3) has 2 assigned"},
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

// `starter get` lists a scale-set pool's jobs that wait in its ledger, by runner request id,
// each judged as `why` judges it and paired, oldest first, with the pool's starting runners.
func TestPoolWaitingListsTheSetsWaitingJobs(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	one := 1
	st := workflows.PoolStatus{Name: "linux", Mode: workflows.PoolActive, Bounds: workflows.Bounds{Max: 1},
		Spec:           workflows.PoolSpec{Name: "linux", MaxReplicas: &one, ScaleSet: &workflows.ScaleSetSpec{}},
		Runners:        []workflows.PoolRunner{{Name: "linux-1", State: workflows.RunnerBusy}},
		RunnersByState: map[workflows.RunnerState]int{workflows.RunnerBusy: 1},
		ScaleSet: &workflows.PoolScaleSetState{ScaleSetID: 3, Listening: true, ListenerMax: 1,
			Ledger: workflows.ScaleSetLedger{Waiting: []int64{41, 42}, Running: []workflows.ScaleSetRunningJob{{RunnerRequestID: 40, RunnerName: "linux-1"}}}},
	}
	jobs, err := PoolWaiting(context.Background(), nil, st, WhyOptions{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Job != 41 || jobs[1].Job != 42 {
		t.Fatalf("waiting %+v, want the ledger's jobs 41 and 42", jobs)
	}
	for _, j := range jobs {
		if j.Cause != CauseAtMax || !strings.Contains(j.Detail, `scale set "linux" (id 3) has it assigned`) {
			t.Errorf("job %d: %s (%s), want at max, assigned by the set", j.Job, j.Cause, j.Detail)
		}
	}
}

// A job waiting in the ledger is paired with a starting runner after the pool's waiting
// reservations, oldest with oldest; a running job's runner is the one the set names.
func TestSetRunnerIsPairedOrNamed(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	st := &workflows.PoolStatus{
		Reserved: []workflows.Reservation{{JobID: 900, QueuedAt: t0}},
		Runners: []workflows.PoolRunner{{Name: "b", State: workflows.RunnerPending, StartedAt: t0.Add(2 * time.Second)},
			{Name: "a", State: workflows.RunnerPending, StartedAt: t0.Add(time.Second)},
			{Name: "c", State: workflows.RunnerRegistering, StartedAt: t0.Add(3 * time.Second)},
			{Name: "d", State: workflows.RunnerBusy}},
		ScaleSet: &workflows.PoolScaleSetState{Ledger: workflows.ScaleSetLedger{Waiting: []int64{7, 8, 9}}},
	}
	tests := []struct {
		job  int64
		j    SetJob
		want string
	}{
		{7, SetJob{Place: SetAssigned}, "b"},
		{8, SetJob{Place: SetAssigned}, "c"},
		{9, SetJob{Place: SetAssigned}, ""},
		{10, SetJob{Place: SetAssigned}, ""},
		{11, SetJob{Place: SetRunning, Runner: "d"}, "d"},
		{12, SetJob{Place: SetRunning, Runner: "gone"}, ""},
		{13, SetJob{Place: SetOffered}, ""},
	}
	for _, tt := range tests {
		got := ""
		if r := setRunner(st, tt.j, tt.job); r != nil {
			got = r.Name
		}
		if got != tt.want {
			t.Errorf("job %d (%s) has runner %q, want %q", tt.job, tt.j.Place, got, tt.want)
		}
	}
}

// The text names the set the job stands in, with its listener and statistics, and the
// job's offer on its path; a job no set holds is shown beside every set.
func TestPrintWhyShowsTheScaleSets(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := ScaleSetFacts{Pool: "linux", SetName: "linux-x64", Job: SetJob{Place: SetOffered, OfferedAt: t0},
		Set: workflows.PoolScaleSetState{ScaleSetID: 3, Listening: true, ListenerMax: 1, SessionID: "s1", MessageAt: t0.Add(time.Second),
			Ledger: workflows.ScaleSetLedger{LastMessageID: 12}, Statistics: workflows.ScaleSetStatistics{AssignedJobs: 1, AvailableJobs: 1}}}
	other := ScaleSetFacts{Pool: "arm", SetName: "arm", Set: workflows.PoolScaleSetState{ScaleSetID: 4}}
	f := WhyFacts{Now: t0.Add(time.Minute), Pools: 2, ScaleSets: []ScaleSetFacts{other, s}}
	f.ScaleSet = &f.ScaleSets[1]
	r := WhyReport{Job: 77, Pool: "linux", Waiting: true, Verdict: decideCause(f), Facts: f, Path: whyPath(f)}
	var out strings.Builder
	printWhy(&out, r)
	text := out.String()
	for _, want := range []string{
		`10:00:00Z  offered to scale set "linux-x64" (id 3)`,
		`10:00:01Z  scale set "linux-x64" (id 3)'s last message (12)`,
		"Waiting: scaleset-offered",
		`Scale set "linux-x64" (id 3) of pool linux: listener running, session "s1", last message 12 at 10:00:01Z; GitHub: 1 assigned of maximum 1, 0 running, 1 available; ledger: 0 waiting, 0 running`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `"arm"`) {
		t.Errorf("text shows a set that does not hold the job:\n%s", text)
	}
	f.ScaleSets[1].Job, f.ScaleSet = SetJob{}, nil
	out.Reset()
	printWhy(&out, WhyReport{Job: 77, Waiting: true, Verdict: decideCause(f), Facts: f})
	if text := out.String(); !strings.Contains(text, `Scale set "arm" (id 4) of pool arm`) || !strings.Contains(text, `Scale set "linux-x64" (id 3) of pool linux`) {
		t.Errorf("a job no set holds is not shown beside every set:\n%s", text)
	}
}

// A job reaches a set by the pool's labels, or by the set's name alone where the service kept
// only that (GHES without custom scale-set labels).
func TestScaleSetOfNamesTheLabelsJobsReachItBy(t *testing.T) {
	st := workflows.PoolStatus{Name: "linux", Spec: workflows.PoolSpec{Name: "linux", Labels: []string{"self-hosted", "x64"},
		ScaleSet: &workflows.ScaleSetSpec{Name: "linux-x64"}}, ScaleSet: &workflows.PoolScaleSetState{ScaleSetID: 3}}
	if got := scaleSetOf(&st, 1).Labels; !slices.Equal(got, []string{"self-hosted", "x64"}) {
		t.Errorf("labels %v, want the pool's", got)
	}
	st.ScaleSet.NameOnlyLabels = true
	if got := scaleSetOf(&st, 1).Labels; !slices.Equal(got, []string{"linux-x64"}) {
		t.Errorf("a set that kept only its name is reached by %v, want [linux-x64]", got)
	}
}
