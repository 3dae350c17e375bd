package workflows

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

func ssAssigned(id int64) ScaleSetJobEvent {
	return ScaleSetJobEvent{Event: ScaleSetJobAssigned, RunnerRequestID: id}
}
func ssStarted(id int64, runner string) ScaleSetJobEvent {
	return ScaleSetJobEvent{Event: ScaleSetJobStarted, RunnerRequestID: id, RunnerName: runner}
}
func ssCompleted(id int64) ScaleSetJobEvent {
	return ScaleSetJobEvent{Event: ScaleSetJobCompleted, RunnerRequestID: id}
}

func TestApplyScaleSetMessage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ledger      ScaleSetLedger
		msg         ScaleSetMessage
		want        ScaleSetLedger
		wantApplied bool
	}{
		{
			name: "assigned jobs wait, each once",
			msg:  ScaleSetMessage{ID: 1, Jobs: []ScaleSetJobEvent{ssAssigned(7), ssAssigned(3), ssAssigned(7)}},
			want: ScaleSetLedger{LastMessageID: 1, Waiting: []int64{3, 7}}, wantApplied: true,
		},
		{
			name:   "a redelivered message changes nothing",
			ledger: ScaleSetLedger{LastMessageID: 4, Waiting: []int64{3}},
			msg:    ScaleSetMessage{ID: 4, Jobs: []ScaleSetJobEvent{ssAssigned(3), ssAssigned(9)}},
			want:   ScaleSetLedger{LastMessageID: 4, Waiting: []int64{3}},
		},
		{
			name:   "an older message changes nothing",
			ledger: ScaleSetLedger{LastMessageID: 4},
			msg:    ScaleSetMessage{ID: 2, Jobs: []ScaleSetJobEvent{ssAssigned(1)}},
			want:   ScaleSetLedger{LastMessageID: 4},
		},
		{
			name:   "a started job runs on its runner",
			ledger: ScaleSetLedger{LastMessageID: 1, Waiting: []int64{3, 7}},
			msg:    ScaleSetMessage{ID: 2, Jobs: []ScaleSetJobEvent{ssStarted(7, "r-1")}},
			want: ScaleSetLedger{LastMessageID: 2, Waiting: []int64{3},
				Running: []ScaleSetRunningJob{{RunnerRequestID: 7, RunnerName: "r-1"}}},
			wantApplied: true,
		},
		{
			name: "assigned, started and completed in one message, handed over by type",
			msg:  ScaleSetMessage{ID: 1, Jobs: []ScaleSetJobEvent{ssCompleted(5), ssStarted(5, "r-2"), ssAssigned(5)}},
			want: ScaleSetLedger{LastMessageID: 1, Completed: []int64{5}}, wantApplied: true,
		},
		{
			name:   "a job cancelled while waiting completes without a runner",
			ledger: ScaleSetLedger{LastMessageID: 1, Waiting: []int64{3}},
			msg:    ScaleSetMessage{ID: 2, Jobs: []ScaleSetJobEvent{ssCompleted(3)}},
			want:   ScaleSetLedger{LastMessageID: 2, Completed: []int64{3}}, wantApplied: true,
		},
		{
			name:   "a late event of a completed job is ignored",
			ledger: ScaleSetLedger{LastMessageID: 2, Completed: []int64{3}},
			msg:    ScaleSetMessage{ID: 3, Jobs: []ScaleSetJobEvent{ssAssigned(3), ssStarted(3, "r-9")}},
			want:   ScaleSetLedger{LastMessageID: 3, Completed: []int64{3}}, wantApplied: true,
		},
		{
			name:   "an assignment of a running job does not make it wait again",
			ledger: ScaleSetLedger{LastMessageID: 1, Running: []ScaleSetRunningJob{{RunnerRequestID: 3, RunnerName: "r"}}},
			msg:    ScaleSetMessage{ID: 2, Jobs: []ScaleSetJobEvent{ssAssigned(3)}},
			want:   ScaleSetLedger{LastMessageID: 2, Running: []ScaleSetRunningJob{{RunnerRequestID: 3, RunnerName: "r"}}}, wantApplied: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, applied := ApplyScaleSetMessage(tc.ledger, tc.msg)
			if applied != tc.wantApplied || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ApplyScaleSetMessage = %+v, %v; want %+v, %v", got, applied, tc.want, tc.wantApplied)
			}
		})
	}
}

func TestApplyScaleSetMessageLeavesItsInputAlone(t *testing.T) {
	in := ScaleSetLedger{LastMessageID: 1, Waiting: []int64{3, 7}}
	_, _ = ApplyScaleSetMessage(in, ScaleSetMessage{ID: 2, Jobs: []ScaleSetJobEvent{ssStarted(3, "r"), ssCompleted(7)}})
	if !reflect.DeepEqual(in, ScaleSetLedger{LastMessageID: 1, Waiting: []int64{3, 7}}) {
		t.Errorf("the input ledger changed: %+v", in)
	}
}

func TestScaleSetCompletedJobsAreBounded(t *testing.T) {
	var l ScaleSetLedger
	for i := range int64(ScaleSetCompletedKept + 5) {
		l, _ = ApplyScaleSetMessage(l, ScaleSetMessage{ID: i + 1, Jobs: []ScaleSetJobEvent{ssCompleted(i)}})
	}
	if len(l.Completed) != ScaleSetCompletedKept || l.Completed[0] != 5 {
		t.Errorf("kept %d completions from %d, want the latest %d", len(l.Completed), l.Completed[0], ScaleSetCompletedKept)
	}
}

func TestScaleSetDemand(t *testing.T) {
	ledger := ScaleSetLedger{Waiting: []int64{1, 2}, Running: []ScaleSetRunningJob{{RunnerRequestID: 3}}}
	for _, tc := range []struct {
		name     string
		ledger   ScaleSetLedger
		assigned int
		done     int
		bounds   Bounds
		want     int
	}{
		{"each open job once", ledger, 3, 0, Bounds{Max: 10}, 3},
		{"GitHub's lower count does not drop known jobs", ledger, 1, 0, Bounds{Max: 10}, 3},
		{"GitHub's higher count brings jobs the ledger missed", ledger, 5, 0, Bounds{Max: 10}, 5},
		{"idle runners ready on top", ledger, 3, 0, Bounds{Max: 10, MinIdle: 2}, 5},
		{"never below the minimum", ScaleSetLedger{}, 0, 0, Bounds{Min: 2, Max: 10}, 2},
		{"never above the maximum", ledger, 40, 0, Bounds{Max: 4, MinIdle: 1}, 4},
		{"a maximum of zero runs nothing", ledger, 3, 0, Bounds{Min: 0, Max: 0, MinIdle: 1}, 0},
		{"a job whose runner is done needs none, in either count", ledger, 3, 1, Bounds{Max: 10}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScaleSetDemand(tc.ledger, ScaleSetStatistics{AssignedJobs: tc.assigned}, tc.bounds, tc.done); got != tc.want {
				t.Errorf("ScaleSetDemand = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestApplyScaleSetAcquired(t *testing.T) {
	running := []ScaleSetRunningJob{{RunnerRequestID: 4, RunnerName: "r4"}}
	for _, tc := range []struct {
		name     string
		ledger   ScaleSetLedger
		acquired []int64
		want     ScaleSetLedger
	}{
		{
			name:     "acquired jobs wait, each once, before their assigned messages",
			ledger:   ScaleSetLedger{LastMessageID: 3, Waiting: []int64{2}},
			acquired: []int64{7, 2, 5, 7},
			want:     ScaleSetLedger{LastMessageID: 3, Waiting: []int64{2, 5, 7}},
		},
		{
			name:     "a running job keeps its runner",
			ledger:   ScaleSetLedger{LastMessageID: 3, Running: running},
			acquired: []int64{4},
			want:     ScaleSetLedger{LastMessageID: 3, Running: running},
		},
		{
			name:     "a job taken back and acquired again is open again",
			ledger:   ScaleSetLedger{LastMessageID: 3, Completed: []int64{1, 6, 8}},
			acquired: []int64{6},
			want:     ScaleSetLedger{LastMessageID: 3, Waiting: []int64{6}, Completed: []int64{1, 8}},
		},
		{
			name:   "nothing acquired changes nothing",
			ledger: ScaleSetLedger{LastMessageID: 3, Completed: []int64{1}},
			want:   ScaleSetLedger{LastMessageID: 3, Completed: []int64{1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprintf("%+v", tc.ledger)
			got := ApplyScaleSetAcquired(tc.ledger, tc.acquired)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ApplyScaleSetAcquired = %+v, want %+v", got, tc.want)
			}
			if after := fmt.Sprintf("%+v", tc.ledger); after != before {
				t.Errorf("the input ledger changed: %s, was %s", after, before)
			}
		})
	}
}

// A burst on a service that offers its jobs (GHES), as the benchmark's offering set met it:
// jobs 1 to 4 were offered in message 1 and acquired after it; message 2 assigns 1 and 2 and
// names their runners, which ran them and left, and its statistics count only 3 and 4. The
// assigned messages of 3 and 4 still wait behind the burst's other offers, while the runners
// started for them wait for them. Counted from the acquisition, the ledger keeps those two
// runners; counted from the assigned messages alone, the demand rests on the statistics, less
// the two jobs done that the statistics no longer count either, and the pool lets go of the
// runners jobs 3 and 4 are about to take.
func TestScaleSetDemandFollowsAcquisitions(t *testing.T) {
	offered := ScaleSetMessage{ID: 1}
	for id := range int64(4) {
		offered.Jobs = append(offered.Jobs, ScaleSetJobEvent{Event: ScaleSetJobAvailable, RunnerRequestID: id + 1})
	}
	assigned := ScaleSetMessage{ID: 2, Statistics: ScaleSetStatistics{AssignedJobs: 2}, Jobs: []ScaleSetJobEvent{
		ssAssigned(1), ssAssigned(2), ssStarted(1, "r1"), ssStarted(2, "r2"),
	}}
	runners := []PoolRunner{{Name: "r3", State: RunnerIdle}, {Name: "r4", State: RunnerIdle}} // r1 and r2 ended
	for _, tc := range []struct {
		name     string
		acquired []int64
		want     int
	}{
		{"acquired jobs counted with their message", []int64{1, 2, 3, 4}, 2},
		{"before changeScaleSetAcquiredAssigned: the runners for 3 and 4 let go", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := ApplyScaleSetMessage(ScaleSetLedger{}, offered)
			l = ApplyScaleSetAcquired(l, tc.acquired)
			l, _ = ApplyScaleSetMessage(l, assigned)
			got := ScaleSetDemand(l, assigned.Statistics, Bounds{Max: 10}, ScaleSetJobsDone(l, runners))
			if got != tc.want {
				t.Errorf("demand = %d, want %d (ledger %+v)", got, tc.want, l)
			}
		})
	}
}

func TestScaleSetJobsDone(t *testing.T) {
	ledger := ScaleSetLedger{Running: []ScaleSetRunningJob{
		{RunnerRequestID: 1, RunnerName: "busy"}, {RunnerRequestID: 2, RunnerName: "leaving"},
		{RunnerRequestID: 3, RunnerName: "gone"}, {RunnerRequestID: 4}, {RunnerRequestID: 5, RunnerName: "removing"},
	}}
	runners := []PoolRunner{
		{Name: "busy", State: RunnerBusy, Busy: true}, {Name: "leaving", State: RunnerDraining},
		{Name: "removing", State: RunnerBusy, Removing: true},
	}
	// Runner 4's name is not known yet: its job is not taken for done.
	if got := ScaleSetJobsDone(ledger, runners); got != 3 {
		t.Errorf("ScaleSetJobsDone = %d, want 3 (leaving, gone, removing)", got)
	}
}

func TestScaleSetFinishedUnseen(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	recent, old := now.Add(-10*time.Second), now.Add(-ScaleSetFinishedHold)
	waiting3 := ScaleSetLedger{Waiting: []int64{1, 2, 3}, Running: []ScaleSetRunningJob{{RunnerRequestID: 4, RunnerName: "named"}}}
	for _, tc := range []struct {
		name     string
		ledger   ScaleSetLedger
		finished []ScaleSetFinishedRunner
		want     int
	}{
		{"none finished", waiting3, nil, 0},
		{"a runner that finished before its started message: its job needs no other", waiting3,
			[]ScaleSetFinishedRunner{{"r1", recent}, {"r2", recent}}, 2},
		{"a runner the ledger names at a running job is counted there, not here", waiting3,
			[]ScaleSetFinishedRunner{{"named", recent}, {"r1", recent}}, 1},
		{"an end past the hold no longer holds a job back", waiting3,
			[]ScaleSetFinishedRunner{{"r1", old}, {"r2", recent}}, 1},
		{"never more than the waiting jobs", ScaleSetLedger{Waiting: []int64{1}},
			[]ScaleSetFinishedRunner{{"r1", recent}, {"r2", recent}}, 1},
		{"no waiting job, nothing to hold back", ScaleSetLedger{},
			[]ScaleSetFinishedRunner{{"r1", recent}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScaleSetFinishedUnseen(tc.ledger, tc.finished, now); got != tc.want {
				t.Errorf("ScaleSetFinishedUnseen = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestForgetNamedRunners(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	recent := now.Add(-10 * time.Second)
	finished := []ScaleSetFinishedRunner{{"started", recent}, {"completed", recent}, {"unnamed", recent}, {"old", now.Add(-ScaleSetFinishedHold)}}
	completed := ssCompleted(2)
	completed.RunnerName = "completed"
	m := ScaleSetMessage{ID: 9, Jobs: []ScaleSetJobEvent{ssStarted(1, "started"), completed, ssAssigned(3)}}
	got := ForgetNamedRunners(finished, m, now)
	if want := []ScaleSetFinishedRunner{{"unnamed", recent}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ForgetNamedRunners = %+v, want %+v", got, want)
	}
	if len(finished) != 4 {
		t.Errorf("ForgetNamedRunners changed its input: %+v", finished)
	}
	if got := ForgetNamedRunners([]ScaleSetFinishedRunner{{"started", recent}}, m, now); got != nil {
		t.Errorf("all forgotten = %+v, want nil (a state that serializes as it did before)", got)
	}
}

func TestReopenReassigned(t *testing.T) {
	done := ScaleSetLedger{LastMessageID: 4, Completed: []int64{1, 2}}
	canceled := ScaleSetJobEvent{Event: ScaleSetJobCompleted, RunnerRequestID: 2, Result: "canceled"}
	for _, tc := range []struct {
		name string
		msg  ScaleSetMessage
		want []int64
	}{
		{"assigned again in a later message", ScaleSetMessage{ID: 5, Jobs: []ScaleSetJobEvent{ssAssigned(2)}}, []int64{1}},
		{"cancelled and assigned in one message: stays completed", ScaleSetMessage{ID: 5, Jobs: []ScaleSetJobEvent{ssAssigned(2), canceled}}, []int64{1, 2}},
		{"a redelivered message changes nothing", ScaleSetMessage{ID: 4, Jobs: []ScaleSetJobEvent{ssAssigned(2)}}, []int64{1, 2}},
		{"a new job", ScaleSetMessage{ID: 5, Jobs: []ScaleSetJobEvent{ssAssigned(9)}}, []int64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReopenReassigned(done, tc.msg)
			if !slices.Equal(got.Completed, tc.want) {
				t.Errorf("completed = %v, want %v", got.Completed, tc.want)
			}
			if len(done.Completed) != 2 {
				t.Errorf("the input ledger changed: %v", done.Completed)
			}
		})
	}
}

func TestBoundScaleSetLedger(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := ScaleSetLedger{Waiting: []int64{1, 2, 3}, Running: []ScaleSetRunningJob{{RunnerRequestID: 4, RunnerName: "r4"}, {RunnerRequestID: 5, RunnerName: "r5"}}}
	for _, tc := range []struct {
		name       string
		assigned   int
		since, now time.Time
		waiting    []int64
		running    int
		wantSince  time.Time
	}{
		{"no excess", 5, time.Time{}, t0, []int64{1, 2, 3}, 2, time.Time{}},
		{"excess begins", 2, time.Time{}, t0, []int64{1, 2, 3}, 2, t0},
		{"within the hold", 2, t0, t0.Add(ScaleSetLedgerExcessHold - time.Second), []int64{1, 2, 3}, 2, t0},
		{"past the hold: the oldest waiting go", 3, t0, t0.Add(ScaleSetLedgerExcessHold), []int64{3}, 2, time.Time{}},
		{"past the hold: all waiting, then the oldest running", 1, t0, t0.Add(ScaleSetLedgerExcessHold), nil, 1, time.Time{}},
		{"past the hold, nothing assigned", 0, t0, t0.Add(ScaleSetLedgerExcessHold), nil, 0, time.Time{}},
		{"the excess gone before the hold", 6, t0, t0.Add(time.Second), []int64{1, 2, 3}, 2, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, since := BoundScaleSetLedger(l, ScaleSetStatistics{AssignedJobs: tc.assigned}, tc.since, tc.now)
			if !slices.Equal(got.Waiting, tc.waiting) || len(got.Running) != tc.running || !since.Equal(tc.wantSince) {
				t.Errorf("waiting %v running %v since %v; want waiting %v, %d running, since %v", got.Waiting, got.Running, since, tc.waiting, tc.running, tc.wantSince)
			}
			if tc.running == 1 && got.Running[0].RunnerRequestID != 5 {
				t.Errorf("kept running %v, want the newest (5)", got.Running)
			}
			if len(l.Waiting) != 3 || len(l.Running) != 2 {
				t.Errorf("the input ledger changed: %+v", l)
			}
		})
	}
}

func TestSessionStatisticsStale(t *testing.T) {
	for _, tc := range []struct {
		name         string
		held, opened string
		stale        bool
	}{
		{"no message's statistics held", "", "s2", false},
		{"statistics of an earlier session's message", "s1", "s2", false},
		{"statistics of a message of the session opened: newer", "s2", "s2", true},
		{"held from another session (ids never repeat)", "s2", "s1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SessionStatisticsStale(tc.held, tc.opened); got != tc.stale {
				t.Errorf("SessionStatisticsStale(%q, %q) = %v, want %v", tc.held, tc.opened, got, tc.stale)
			}
		})
	}
}
