package workflows

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func queued(job int64) WorkflowJobEvent { return WorkflowJobEvent{JobID: job, Action: JobQueued} }

func queuedAt(job int64, at time.Time) WorkflowJobEvent {
	return WorkflowJobEvent{JobID: job, Action: JobQueued, At: at}
}

func completed(job int64, conclusion, runner string) WorkflowJobEvent {
	return WorkflowJobEvent{JobID: job, Action: JobCompleted, Conclusion: conclusion, RunnerName: runner}
}

func res(job int64, expires time.Time, d time.Duration) Reservation {
	return Reservation{JobID: job, ExpiresAt: expires, Duration: d}
}

func rel(job int64, forget time.Time) ReleasedJob { return ReleasedJob{JobID: job, ForgetAt: forget} }

func batchOf(events ...WorkflowJobEvent) ReservationBatch { return ReservationBatch{Events: events} }

func TestApplyReservationBatch(t *testing.T) {
	const d = 10 * time.Minute
	p := ReservationParams{Now: t0, Duration: d, MaxReplicas: -1}
	withMax := func(max int) ReservationParams { q := p; q.MaxReplicas = max; return q }
	withPool := func(pool string) ReservationParams { q := p; q.Pool = pool; return q }
	eventTimes := func(max int) ReservationParams { q := p; q.EventTimes = true; q.MaxReplicas = max; return q }
	serving := func(n int) ReservationParams { q := p; q.WaitForRunners = true; q.ServingRunners = n; return q }
	unserved := func(idle int, served ...int64) ReservationParams {
		q := p
		q.RenewUnserved, q.IdleRunners, q.ServedJobs = true, idle, served
		return q
	}
	renewed := func(r Reservation, n int) Reservation { r.Renewals = n; return r }
	forget := t0.Add(ReleasedJobMemory)

	tests := []struct {
		name   string
		state  ReservationState
		batch  ReservationBatch
		params ReservationParams
		want   ReservationState
		result ReservationBatchResult
	}{{
		name:   "queued jobs each reserve once, sorted by job id",
		batch:  batchOf(queued(30), queued(10), queued(20)),
		params: p,
		want:   ReservationState{Reservations: []Reservation{res(10, t0.Add(d), d), res(20, t0.Add(d), d), res(30, t0.Add(d), d)}},
		result: ReservationBatchResult{Added: 3, Active: 3},
	}, {
		name:   "duplicate queued in one batch and across batches adds nothing and keeps the clock",
		state:  ReservationState{Reservations: []Reservation{res(7, t0.Add(time.Minute), d)}},
		batch:  batchOf(queued(7), queued(8), queued(8)),
		params: p,
		want:   ReservationState{Reservations: []Reservation{res(7, t0.Add(time.Minute), d), res(8, t0.Add(d), d)}},
		result: ReservationBatchResult{Added: 1, Active: 2},
	}, {
		name:   "completion removes that job's reservation, not the oldest",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(time.Minute), d), res(2, t0.Add(2*time.Minute), d), res(3, t0.Add(3*time.Minute), d)}},
		batch:  batchOf(completed(2, "success", "pool-abcd-1")),
		params: p,
		want: ReservationState{
			Reservations: []Reservation{res(1, t0.Add(time.Minute), d), res(3, t0.Add(3*time.Minute), d)},
			Released:     []ReleasedJob{rel(2, forget)},
		},
		result: ReservationBatchResult{Released: 1, Active: 2},
	}, {
		name:   "completion before queued, in one batch: the late queued reserves nothing",
		batch:  batchOf(completed(5, "failure", "pool-abcd-1"), queued(5)),
		params: p,
		want:   ReservationState{Released: []ReleasedJob{rel(5, forget)}},
		result: ReservationBatchResult{},
	}, {
		name:   "completion before queued, across batches: the remembered job reserves nothing",
		state:  ReservationState{Released: []ReleasedJob{rel(5, t0.Add(time.Minute))}},
		batch:  batchOf(queued(5)),
		params: p,
		want:   ReservationState{Released: []ReleasedJob{rel(5, t0.Add(time.Minute))}},
		result: ReservationBatchResult{},
	}, {
		name:   "a forgotten job (memory over exactly at now) may reserve again",
		state:  ReservationState{Released: []ReleasedJob{rel(5, t0)}},
		batch:  batchOf(queued(5)),
		params: p,
		want:   ReservationState{Reservations: []Reservation{res(5, t0.Add(d), d)}},
		result: ReservationBatchResult{Added: 1, Active: 1},
	}, {
		name:   "queued then completed in one batch nets zero",
		batch:  batchOf(queued(9), completed(9, "success", "pool-abcd-2")),
		params: p,
		want:   ReservationState{Released: []ReleasedJob{rel(9, forget)}},
		result: ReservationBatchResult{Added: 1, Released: 1},
	}, {
		name:   "duplicate completion is remembered once with its first forget time",
		state:  ReservationState{Released: []ReleasedJob{rel(4, t0.Add(time.Minute))}},
		batch:  batchOf(completed(4, "success", "pool-abcd-1")),
		params: p,
		want:   ReservationState{Released: []ReleasedJob{rel(4, t0.Add(time.Minute))}},
		result: ReservationBatchResult{},
	}, {
		name:   "skipped and runnerless success release nobody else's reservation",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d)}},
		batch:  batchOf(completed(2, "skipped", ""), completed(3, "success", "")),
		params: p,
		want: ReservationState{
			Reservations: []Reservation{res(1, t0.Add(d), d)},
			Released:     []ReleasedJob{rel(2, forget), rel(3, forget)},
		},
		result: ReservationBatchResult{Active: 1},
	}, {
		name:   "skipped job that did reserve releases only its own reservation",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d), res(2, t0.Add(d), d)}},
		batch:  batchOf(completed(2, "skipped", "")),
		params: p,
		want: ReservationState{
			Reservations: []Reservation{res(1, t0.Add(d), d)},
			Released:     []ReleasedJob{rel(2, forget)},
		},
		result: ReservationBatchResult{Released: 1, Active: 1},
	}, {
		name:   "waiting and in_progress change nothing without the pool's name (histories before the rule)",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d)}},
		batch:  batchOf(WorkflowJobEvent{JobID: 2, Action: JobWaiting}, WorkflowJobEvent{JobID: 1, Action: JobInProgress, RunnerName: "other-abcd-1"}),
		params: p,
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d)}},
		result: ReservationBatchResult{Active: 1},
	}, {
		name:   "in_progress on one of the pool's own runners keeps the reservation (the runner ends it)",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d)}},
		batch:  batchOf(WorkflowJobEvent{JobID: 1, Action: JobInProgress, RunnerName: "pool-abcd-1"}),
		params: withPool("pool"),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d)}},
		result: ReservationBatchResult{Active: 1},
	}, {
		name:  "in_progress on another pool's runner, or a runner runnerflow does not run, ends the reservation",
		state: ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d), res(2, t0.Add(d), d), res(3, t0.Add(d), d)}},
		batch: batchOf(
			WorkflowJobEvent{JobID: 1, Action: JobInProgress, RunnerName: "other-abcd-1"},
			WorkflowJobEvent{JobID: 2, Action: JobInProgress, RunnerName: "GitHub Actions 5"},
			WorkflowJobEvent{JobID: 3, Action: JobInProgress}, // names no runner: says nothing
		),
		params: withPool("pool"),
		want: ReservationState{
			Reservations: []Reservation{res(3, t0.Add(d), d)},
			Released:     []ReleasedJob{rel(1, forget), rel(2, forget)},
		},
		result: ReservationBatchResult{Released: 2, Active: 1},
	}, {
		name:   "in_progress elsewhere before the queued event: the late queued reserves nothing",
		batch:  batchOf(WorkflowJobEvent{JobID: 4, Action: JobInProgress, RunnerName: "other-abcd-1"}, queued(4)),
		params: withPool("pool"),
		want:   ReservationState{Released: []ReleasedJob{rel(4, forget)}},
		result: ReservationBatchResult{},
	}, {
		name:   "expiry exactly at now is dropped; one nanosecond later still counts",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d), res(2, t0.Add(time.Nanosecond), d), res(3, t0.Add(-time.Second), d)}},
		batch:  batchOf(),
		params: p,
		want:   ReservationState{Reservations: []Reservation{res(2, t0.Add(time.Nanosecond), d)}},
		result: ReservationBatchResult{Expired: 2, Active: 1},
	}, {
		name:   "backlog beyond max restarts its clocks with each reservation's own duration",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(time.Minute), d), res(2, t0.Add(time.Minute), d), res(3, t0.Add(time.Minute), 3*time.Minute), res(4, t0.Add(time.Minute), 0)}},
		batch:  batchOf(queued(5)),
		params: withMax(2),
		want: ReservationState{Reservations: []Reservation{
			res(1, t0.Add(time.Minute), d), res(2, t0.Add(time.Minute), d),
			res(3, t0.Add(3*time.Minute), 3*time.Minute), res(4, t0.Add(d), d), res(5, t0.Add(d), d),
		}},
		result: ReservationBatchResult{Added: 1, Active: 5},
	}, {
		name:   "max zero: every reservation waits",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(time.Second), time.Minute)}},
		batch:  batchOf(),
		params: withMax(0),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(time.Minute), time.Minute)}},
		result: ReservationBatchResult{Active: 1},
	}, {
		name:   "waiting for runners: expired reservations beyond the serving runners restart their clocks",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d), res(2, t0.Add(-time.Second), d), res(3, t0, 3*time.Minute), res(4, t0, 0)}},
		batch:  batchOf(),
		params: serving(1),
		want:   ReservationState{Reservations: []Reservation{res(2, t0.Add(d), d), res(3, t0.Add(3*time.Minute), 3*time.Minute), res(4, t0.Add(d), d)}},
		result: ReservationBatchResult{Expired: 1, Renewed: 3, Active: 3},
	}, {
		name:   "waiting for runners: reservations not yet expired keep their clocks",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(time.Minute), d), res(2, t0.Add(time.Minute), d)}},
		batch:  batchOf(),
		params: serving(0),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(time.Minute), d), res(2, t0.Add(time.Minute), d)}},
		result: ReservationBatchResult{Active: 2},
	}, {
		name:   "waiting for runners: with a runner online for each, expired ones are dropped",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d), res(2, t0, d)}},
		batch:  batchOf(),
		params: serving(2),
		want:   ReservationState{},
		result: ReservationBatchResult{Expired: 2},
	}, {
		name:   "renew unserved: a job's runner still registering keeps its reservation while a later job's busy runner serves its own",
		state:  ReservationState{Reservations: []Reservation{res(101, t0, d), res(102, t0.Add(time.Minute), d)}},
		batch:  batchOf(),
		params: unserved(0, 102),
		want:   ReservationState{Reservations: []Reservation{renewed(res(101, t0.Add(d), d), 1), res(102, t0.Add(time.Minute), d)}},
		result: ReservationBatchResult{Renewed: 1, Active: 2},
	}, {
		name:   "renew unserved: an expired reservation a busy runner holds expires (the runner counts for its job)",
		state:  ReservationState{Reservations: []Reservation{res(101, t0.Add(time.Minute), d), res(102, t0, d)}},
		batch:  batchOf(),
		params: unserved(0, 102),
		want:   ReservationState{Reservations: []Reservation{res(101, t0.Add(time.Minute), d)}},
		result: ReservationBatchResult{Expired: 1, Active: 1},
	}, {
		name:   "renew unserved: the unserved reservations take the idle runners in job-id order, the rest restart and count",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d), res(2, t0, d), res(3, t0, d), renewed(res(4, t0, 0), 2)}},
		batch:  batchOf(),
		params: unserved(1, 2),
		want:   ReservationState{Reservations: []Reservation{renewed(res(3, t0.Add(d), d), 1), renewed(res(4, t0.Add(d), d), 3)}},
		result: ReservationBatchResult{Expired: 2, Renewed: 2, Active: 2},
	}, {
		name:   "renew unserved: an idle runner for each unserved reservation, all expire",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d), res(2, t0, d)}},
		batch:  batchOf(),
		params: unserved(2),
		want:   ReservationState{},
		result: ReservationBatchResult{Expired: 2},
	}, {
		name:   "without the rule, a reservation no runner served still expires",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d)}},
		batch:  batchOf(),
		params: p,
		want:   ReservationState{},
		result: ReservationBatchResult{Expired: 1},
	}, {
		name:   "expired reservations are dropped before the backlog is counted",
		state:  ReservationState{Reservations: []Reservation{res(1, t0, d), res(2, t0.Add(time.Minute), d), res(3, t0.Add(time.Minute), d)}},
		batch:  batchOf(),
		params: withMax(2),
		want:   ReservationState{Reservations: []Reservation{res(2, t0.Add(time.Minute), d), res(3, t0.Add(time.Minute), d)}},
		result: ReservationBatchResult{Expired: 1, Active: 2},
	}, {
		name:   "zero duration means the default; bad job ids and unknown actions are ignored",
		batch:  batchOf(queued(0), queued(-3), WorkflowJobEvent{JobID: 4, Action: "requested"}, queued(6)),
		params: ReservationParams{Now: t0, MaxReplicas: -1},
		want:   ReservationState{Reservations: []Reservation{res(6, t0.Add(DefaultReservationDuration), DefaultReservationDuration)}},
		result: ReservationBatchResult{Added: 1, Active: 1},
	}, {
		name: "amounts: adds, releases and expiries counted together",
		state: ReservationState{
			Reservations: []Reservation{res(1, t0.Add(-time.Second), d), res(2, t0.Add(time.Minute), d), res(3, t0.Add(time.Minute), d)},
			Released:     []ReleasedJob{rel(99, t0.Add(-time.Second))},
		},
		batch:  batchOf(queued(4), queued(5), queued(2), completed(3, "success", "pool-abcd-3"), completed(6, "cancelled", "")),
		params: p,
		want: ReservationState{
			Reservations: []Reservation{res(2, t0.Add(time.Minute), d), res(4, t0.Add(d), d), res(5, t0.Add(d), d)},
			Released:     []ReleasedJob{rel(3, forget), rel(6, forget)},
		},
		result: ReservationBatchResult{Added: 2, Released: 1, Expired: 1, Active: 3},
	}, {
		name:   "event times: a reservation counts from its queued event's own time",
		batch:  batchOf(queuedAt(1, t0.Add(-3*time.Minute)), queuedAt(2, t0.Add(-time.Second))),
		params: eventTimes(-1),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(7*time.Minute), d), res(2, t0.Add(d-time.Second), d)}},
		result: ReservationBatchResult{Added: 2, Active: 2},
	}, {
		name: "event times: a batch held back past its events' duration holds them LateReservationHold, so their jobs get runners",
		batch: batchOf(queuedAt(1, t0.Add(-d)), queuedAt(2, t0.Add(-15*time.Minute)),
			queuedAt(3, t0.Add(-d+time.Second)), queuedAt(4, t0.Add(-5*time.Minute))),
		params: eventTimes(-1),
		want: ReservationState{Reservations: []Reservation{res(1, t0.Add(LateReservationHold), d), res(2, t0.Add(LateReservationHold), d),
			res(3, t0.Add(LateReservationHold), d), res(4, t0.Add(5*time.Minute), d)}},
		result: ReservationBatchResult{Added: 4, Active: 4},
	}, {
		name:   "event times: a duration shorter than LateReservationHold holds a late job no longer than a fresh one",
		batch:  batchOf(queuedAt(1, t0.Add(-15*time.Minute)), queuedAt(2, t0.Add(-10*time.Second))),
		params: ReservationParams{Now: t0, Duration: 30 * time.Second, MaxReplicas: -1, EventTimes: true},
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(30*time.Second), 30*time.Second), res(2, t0.Add(30*time.Second), 30*time.Second)}},
		result: ReservationBatchResult{Added: 2, Active: 2},
	}, {
		name:   "event times: a time ahead of the pool's clock counts from now; no time counts from now",
		batch:  batchOf(queuedAt(1, t0.Add(time.Hour)), queued(2)),
		params: eventTimes(-1),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d), res(2, t0.Add(d), d)}},
		result: ReservationBatchResult{Added: 2, Active: 2},
	}, {
		name:   "event times off (histories before the rule): a late batch counts from now",
		batch:  batchOf(queuedAt(1, t0.Add(-15*time.Minute))),
		params: p,
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(d), d)}},
		result: ReservationBatchResult{Added: 1, Active: 1},
	}, {
		name:   "event times: a redelivered queued event keeps its reservation's clock",
		state:  ReservationState{Reservations: []Reservation{res(1, t0.Add(2*time.Minute), d)}},
		batch:  batchOf(queuedAt(1, t0)),
		params: eventTimes(-1),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(2*time.Minute), d)}},
		result: ReservationBatchResult{Active: 1},
	}, {
		name:   "event times: a backlog beyond max still restarts its clocks from now",
		batch:  batchOf(queuedAt(1, t0.Add(-5*time.Minute)), queuedAt(2, t0.Add(-5*time.Minute))),
		params: eventTimes(1),
		want:   ReservationState{Reservations: []Reservation{res(1, t0.Add(5*time.Minute), d), res(2, t0.Add(d), d)}},
		result: ReservationBatchResult{Added: 2, Active: 2},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneState(tt.state)
			got, result := ApplyReservationBatch(tt.state, tt.batch, tt.params)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("state:\n got %+v\nwant %+v", got, tt.want)
			}
			if result != tt.result {
				t.Errorf("result: got %+v, want %+v", result, tt.result)
			}
			if !reflect.DeepEqual(tt.state, before) {
				t.Errorf("input state was modified: %+v, was %+v", tt.state, before)
			}
		})
	}
}

func cloneState(s ReservationState) ReservationState {
	return ReservationState{
		Reservations: append([]Reservation(nil), s.Reservations...),
		Released:     append([]ReleasedJob(nil), s.Released...),
	}
}

// TestApplyReservationBatchOrderFree checks that any order of the same events, delivered any
// number of times, leaves the same book: GitHub neither orders nor deduplicates deliveries.
func TestApplyReservationBatchOrderFree(t *testing.T) {
	events := []WorkflowJobEvent{queued(1), queued(2), completed(1, "success", "p-abcd-1"), queued(3), completed(3, "skipped", ""), queued(4)}
	p := ReservationParams{Now: t0, Duration: time.Minute, MaxReplicas: -1}
	want, _ := ApplyReservationBatch(ReservationState{}, batchOf(events...), p)
	for shift := 1; shift < len(events); shift++ {
		var order []WorkflowJobEvent
		for i := range events {
			order = append(order, events[(i+shift)%len(events)], events[(i*shift)%len(events)])
		}
		// Split into two batches to cover events of one job landing in different windows.
		mid := len(order) / 2
		s, _ := ApplyReservationBatch(ReservationState{}, batchOf(order[:mid]...), p)
		got, _ := ApplyReservationBatch(s, batchOf(order[mid:]...), p)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("shift %d: got %+v, want %+v", shift, got, want)
		}
	}
}

func TestReservationStateActive(t *testing.T) {
	s := ReservationState{Reservations: []Reservation{res(1, t0, time.Minute), res(2, t0.Add(time.Millisecond), time.Minute), res(3, t0.Add(time.Hour), time.Minute)}}
	for _, tt := range []struct {
		now  time.Time
		want int
	}{{t0.Add(-time.Second), 3}, {t0, 2}, {t0.Add(time.Millisecond), 1}, {t0.Add(time.Hour), 0}} {
		if got := s.Active(tt.now); got != tt.want {
			t.Errorf("Active(%v) = %d, want %d", tt.now, got, tt.want)
		}
	}
}

func TestReservationStateWaitsForRunner(t *testing.T) {
	s := ReservationState{Reservations: []Reservation{res(1, t0, time.Minute), res(2, t0.Add(time.Hour), time.Minute), res(3, t0, time.Minute)}}
	for _, tt := range []struct {
		name    string
		now     time.Time
		serving int
		want    bool
	}{
		{"nothing expired", t0.Add(-time.Second), 0, false},
		{"an expired one beyond the serving runners", t0, 2, true},
		{"every expired one within the serving runners", t0, 3, false},
		{"no runner online", t0, 0, true},
	} {
		if got := s.WaitsForRunner(tt.now, tt.serving); got != tt.want {
			t.Errorf("%s: WaitsForRunner(%v, %d) = %v, want %v", tt.name, tt.now, tt.serving, got, tt.want)
		}
	}
}

func TestReservationStateWaitsUnserved(t *testing.T) {
	s := ReservationState{Reservations: []Reservation{res(1, t0, time.Minute), res(2, t0, time.Minute), res(3, t0.Add(time.Hour), time.Minute)}}
	for _, tt := range []struct {
		name   string
		now    time.Time
		served []int64
		idle   int
		want   bool
	}{
		{"nothing expired", t0.Add(-time.Second), nil, 0, false},
		{"no runner online", t0, nil, 0, true},
		{"the expired ones served by busy runners", t0, []int64{1, 2}, 0, false},
		{"one served, the other expired one takes the idle runner", t0, []int64{2}, 1, false},
		{"one served, no idle runner for the other", t0, []int64{2}, 0, true},
		{"an idle runner for the first expired one only", t0, nil, 1, true},
		{"idle runners for both", t0, nil, 2, false},
	} {
		if got := s.WaitsUnserved(tt.now, tt.served, tt.idle); got != tt.want {
			t.Errorf("%s: WaitsUnserved(%v, %v, %d) = %v, want %v", tt.name, tt.now, tt.served, tt.idle, got, tt.want)
		}
	}
}
