package workflows

import (
	"slices"
	"testing"
	"time"
)

func TestWaitingByCause(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	res := func(ids ...int64) []Reservation {
		var out []Reservation
		for _, id := range ids {
			out = append(out, Reservation{JobID: id, ExpiresAt: t0.Add(time.Minute)})
		}
		return out
	}
	runner := func(name string, state RunnerState, started time.Duration) PoolRunner {
		return PoolRunner{Name: name, State: state, StartedAt: t0.Add(started)}
	}
	blocked := runner("q", RunnerPending, 0)
	blocked.Blocked = &RunnerBlock{Reason: BlockQuota}
	busyWith := runner("b", RunnerBusy, 0)
	busyWith.JobID = 1
	expired := Reservation{JobID: 9, ExpiresAt: t0}
	want := func(kv ...any) []int {
		out := make([]int, len(WaitCauses))
		for i := 0; i < len(kv); i += 2 {
			out[slices.Index(WaitCauses, kv[i].(string))] = kv[i+1].(int)
		}
		return out
	}
	tests := []struct {
		name string
		in   WaitingInput
		want []int
	}{
		{"nothing waits", WaitingInput{Bounds: Bounds{Max: 2}}, want()},
		{"paused: every waiting job", WaitingInput{Mode: PoolPaused, Reserved: res(1, 2)}, want(WaitPaused, 2)},
		{"a job its runner runs and an expired reservation do not wait", WaitingInput{Bounds: Bounds{Max: 1},
			Reserved: append(res(1), expired), Runners: []PoolRunner{busyWith}}, want()},
		{"oldest jobs paired with the oldest starting runners; the rest at max", WaitingInput{Bounds: Bounds{Max: 3},
			Reserved: res(1, 2, 3, 4), Runners: []PoolRunner{runner("r", RunnerRegistering, time.Second), blocked, runner("p", RunnerPending, 2*time.Second)}},
			want(WaitQuota, 1, WaitNotOnline, 1, WaitStarting, 1, WaitAtMax, 1)},
		{"more starting runners than jobs count only the jobs", WaitingInput{Bounds: Bounds{Max: 5},
			Reserved: res(1), Runners: []PoolRunner{runner("a", RunnerPending, 0), runner("b", RunnerPending, time.Second)}}, want(WaitStarting, 1)},
		{"idle runners not yet handed the job", WaitingInput{Bounds: Bounds{Max: 5}, Reserved: res(1, 2),
			Runners: []PoolRunner{runner("i", RunnerIdle, 0)}}, want(WaitUnassigned, 1, WaitDeciding, 1)},
		{"an override below the spec's max", WaitingInput{Bounds: Bounds{Max: 1}, Override: true, SpecMax: 4, Reserved: res(1, 2),
			Runners: []PoolRunner{runner("b", RunnerBusy, 0)}}, want(WaitOverride, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = t0
			if tt.in.Mode == "" {
				tt.in.Mode = PoolActive
			}
			if got := WaitingByCause(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v (in the order %v)", got, tt.want, WaitCauses)
			}
		})
	}
}

// A reservation's holds add up per cause across the pool's looks; the longest wins, the first
// in WaitCauses order on a tie.
func TestReservationHoldsAndTheLongest(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	var r Reservation
	r.holdBy(WaitAtMax, t0)
	r.holdBy(WaitAtMax, t0.Add(10*time.Second))
	r.holdBy(WaitStarting, t0.Add(30*time.Second))
	r.holdBy(WaitAtMax, t0.Add(45*time.Second))
	r.closeHold(t0.Add(50 * time.Second))
	want := []CauseHeld{{WaitAtMax, 35 * time.Second}, {WaitStarting, 15 * time.Second}}
	if !slices.Equal(r.Held, want) {
		t.Errorf("held %v, want %v", r.Held, want)
	}
	if got := LongestHeld(r.Held); got != WaitAtMax {
		t.Errorf("longest %q, want %q", got, WaitAtMax)
	}
	tie := []CauseHeld{{WaitAtMax, time.Second}, {WaitQuota, time.Second}}
	if got := LongestHeld(tie); got != WaitQuota {
		t.Errorf("longest of a tie %q, want %q (first in WaitCauses)", got, WaitQuota)
	}
	if got := LongestHeld(nil); got != "" {
		t.Errorf("longest of nothing %q, want none", got)
	}
}
