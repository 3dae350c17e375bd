package workflows

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var decideNow = time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)

const (
	decHashNew = "new"
	decHashOld = "old"
)

// rn builds a runner: seq, state and template hash; options tweak the rest.
func decRunner(seq int64, state RunnerState, hash string, opts ...func(*PoolRunner)) PoolRunner {
	r := PoolRunner{Name: "r" + string(rune('0'+seq)), Seq: seq, State: state, TemplateHash: hash, Busy: state == RunnerBusy}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func decDraining(r *PoolRunner) { r.Draining = true }
func decSlot(n int) func(*PoolRunner) {
	return func(r *PoolRunner) { r.Stateful, r.Slot = true, n }
}

func decIn(minR, maxR int, runners ...PoolRunner) DecideInput {
	return DecideInput{
		Now: decideNow, Bounds: Bounds{Min: minR, Max: maxR}, Mode: PoolActive, TemplateHash: decHashNew,
		Runners: runners, ScaleDownDelay: 10 * time.Minute,
	}
}

func stateful(d DecideInput) DecideInput { d.Stateful = true; return d }

func decWith(d DecideInput, f func(*DecideInput)) DecideInput { f(&d); return d }

func TestDecide(t *testing.T) {
	cases := []struct {
		name        string
		in          DecideInput
		desired     int
		starts      int
		slots       []int
		drain       []string
		scaleOut    bool
		wakeAt      time.Time
		drainReason string
	}{
		// min/max clamp
		{name: "empty pool starts min", in: decIn(2, 5), desired: 2, starts: 2, scaleOut: true},
		{name: "reservations add to min", in: decWith(decIn(1, 5), func(d *DecideInput) { d.Reservations = 2 }), desired: 3, starts: 3, scaleOut: true},
		{name: "reservations clamped to max", in: decWith(decIn(2, 5), func(d *DecideInput) { d.Reservations = 10 }), desired: 5, starts: 5, scaleOut: true},
		{name: "enough runners: nothing to do", in: decWith(decIn(2, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerPending, decHashNew)), func(d *DecideInput) { d.LastDesired = 2 }), desired: 2},
		{name: "a runner busy with another pool's job does not serve this pool's reservations",
			in:      decWith(decIn(0, 5, decRunner(1, RunnerBusy, decHashNew)), func(d *DecideInput) { d.Reservations, d.BusyElsewhere, d.LastDesired = 1, 1, 1 }),
			desired: 2, starts: 1, scaleOut: true},
		{name: "busy elsewhere counts on top of min",
			in:      decWith(decIn(2, 5, decRunner(1, RunnerBusy, decHashNew), decRunner(2, RunnerIdle, decHashNew)), func(d *DecideInput) { d.BusyElsewhere, d.LastDesired = 1, 2 }),
			desired: 3, starts: 1, scaleOut: true},
		{name: "max 0 runs nothing", in: decWith(decIn(0, 0), func(d *DecideInput) { d.Reservations = 3 }), desired: 0},
		// minIdle
		{name: "minIdle tops up above busy runners", in: decWith(decIn(0, 10, decRunner(1, RunnerBusy, decHashNew), decRunner(2, RunnerBusy, decHashNew), decRunner(3, RunnerBusy, decHashNew)), func(d *DecideInput) { d.Bounds.MinIdle = 2 }), desired: 5, starts: 2, scaleOut: true},
		{name: "minIdle adds nothing when demand already leaves idle runners", in: decWith(decIn(0, 10, decRunner(1, RunnerBusy, decHashNew)), func(d *DecideInput) { d.Bounds.MinIdle = 1; d.Reservations = 3 }), desired: 3, starts: 2, scaleOut: true},
		{name: "minIdle capped by max", in: decWith(decIn(0, 4, decRunner(1, RunnerBusy, decHashNew), decRunner(2, RunnerBusy, decHashNew), decRunner(3, RunnerBusy, decHashNew)), func(d *DecideInput) { d.Bounds.MinIdle = 3 }), desired: 4, starts: 1, scaleOut: true},
		// scale-down delay
		{name: "scale-down held within the delay", in: decWith(decIn(1, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerIdle, decHashNew), decRunner(3, RunnerIdle, decHashNew)), func(d *DecideInput) {
			d.LastDesired, d.LastScaleOut = 3, decideNow.Add(-time.Minute)
		}), desired: 1, wakeAt: decideNow.Add(9 * time.Minute)},
		{name: "scale-down after the delay drains newest idle first", in: decWith(decIn(1, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerIdle, decHashNew), decRunner(3, RunnerIdle, decHashNew)), func(d *DecideInput) {
			d.LastDesired, d.LastScaleOut = 3, decideNow.Add(-10*time.Minute)
		}), desired: 1, drain: []string{"r3", "r2"}, drainReason: DrainScaleDown},
		{name: "delay never keeps more than max", in: decWith(decIn(0, 1, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerIdle, decHashNew), decRunner(3, RunnerIdle, decHashNew)), func(d *DecideInput) {
			d.LastDesired, d.LastScaleOut = 3, decideNow.Add(-time.Minute)
		}), desired: 0, drain: []string{"r3", "r2"}},
		// drain choice
		{name: "busy runners are never drained", in: decWith(decIn(1, 5, decRunner(1, RunnerBusy, decHashNew), decRunner(2, RunnerIdle, decHashNew), decRunner(3, RunnerBusy, decHashNew), decRunner(4, RunnerBusy, decHashNew)), func(d *DecideInput) {
			d.Bounds.Max, d.LastDesired = 1, 4
		}), desired: 1, drain: []string{"r2"}},
		{name: "a draining runner that was busy is still busy", in: decWith(decIn(0, 5, decRunner(1, RunnerDraining, decHashNew, func(r *PoolRunner) { r.Busy = true }), decRunner(2, RunnerIdle, decHashNew)), func(d *DecideInput) { d.LastDesired = 1 }), desired: 1},
		{name: "least ready drained first", in: decWith(decIn(0, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerRegistering, decHashNew), decRunner(3, RunnerPending, decHashNew), decRunner(4, RunnerIdle, decHashNew)), func(d *DecideInput) { d.LastDesired = 4 }), desired: 0, drain: []string{"r3", "r2", "r4", "r1"}},
		{name: "leaving runners are replaced", in: decWith(decIn(3, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerIdle, decHashNew), decRunner(3, RunnerIdle, decHashNew, decDraining)), func(d *DecideInput) { d.LastDesired = 3 }), desired: 3, starts: 1},
		// rollout
		{name: "rollout drains idle outdated and starts replacements in their place", in: decWith(decIn(4, 4, decRunner(1, RunnerIdle, decHashOld), decRunner(2, RunnerBusy, decHashOld), decRunner(3, RunnerPending, decHashOld), decRunner(4, RunnerBusy, decHashOld)), func(d *DecideInput) { d.LastDesired = 4 }),
			desired: 4, starts: 2, drain: []string{"r1", "r3"}, drainReason: DrainOutdated},
		{name: "rollout never exceeds max while busy outdated runners work", in: decWith(decIn(2, 2, decRunner(1, RunnerBusy, decHashOld), decRunner(2, RunnerBusy, decHashOld)), func(d *DecideInput) { d.LastDesired = 2 }), desired: 2},
		{name: "rollout replaces a busy outdated runner after its job", in: decWith(decIn(2, 2, decRunner(1, RunnerBusy, decHashNew), decRunner(2, RunnerIdle, decHashOld)), func(d *DecideInput) { d.LastDesired = 2 }), desired: 2, starts: 1, drain: []string{"r2"}},
		{name: "rollout goes on within the scale-down delay", in: decWith(decIn(1, 3, decRunner(1, RunnerIdle, decHashOld), decRunner(2, RunnerIdle, decHashOld)), func(d *DecideInput) {
			d.LastDesired, d.LastScaleOut = 2, decideNow.Add(-time.Minute)
		}), desired: 1, starts: 1, drain: []string{"r1", "r2"}},
		// scale to and from zero
		{name: "scale to zero drains every idle runner", in: decWith(decIn(0, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerIdle, decHashNew)), func(d *DecideInput) { d.LastDesired = 2 }), desired: 0, drain: []string{"r2", "r1"}},
		{name: "scale from zero on the first reservation", in: decWith(decIn(0, 5), func(d *DecideInput) { d.Reservations = 1 }), desired: 1, starts: 1, scaleOut: true},
		{name: "draining pool drains despite demand and delay", in: decWith(decIn(2, 5, decRunner(1, RunnerIdle, decHashNew), decRunner(2, RunnerBusy, decHashNew)), func(d *DecideInput) {
			d.Mode, d.Reservations, d.LastDesired, d.LastScaleOut = PoolDraining, 3, 5, decideNow
		}), desired: 0, drain: []string{"r1"}, drainReason: DrainPool},
		// paused
		{name: "paused changes nothing", in: decWith(decIn(3, 5, decRunner(1, RunnerIdle, decHashOld), decRunner(2, RunnerIdle, decHashNew)), func(d *DecideInput) { d.Mode = PoolPaused }), desired: 3},
		// stateful slots
		{name: "stateful starts fill free slots only", in: stateful(decIn(3, 3, decRunner(1, RunnerIdle, decHashNew, decSlot(1)), decRunner(2, RunnerIdle, decHashNew, decSlot(0), decDraining))), desired: 3, starts: 1, slots: []int{2}, scaleOut: true},
		{name: "stateful slot reused once its runner ended", in: stateful(decIn(2, 2, decRunner(1, RunnerIdle, decHashNew, decSlot(1)))), desired: 2, starts: 1, slots: []int{0}, scaleOut: true},
		// failure backoff
		{name: "starts held after failures", in: decWith(decIn(2, 5), func(d *DecideInput) { d.StartNotBefore = decideNow.Add(time.Minute) }), desired: 2, wakeAt: decideNow.Add(time.Minute), scaleOut: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Decide(tc.in)
			if plan.Desired != tc.desired {
				t.Errorf("desired = %d, want %d (%s)", plan.Desired, tc.desired, plan.Why)
			}
			if len(plan.Start) != tc.starts {
				t.Errorf("starts = %d, want %d (%s)", len(plan.Start), tc.starts, plan.Why)
			}
			if tc.slots != nil {
				var got []int
				for _, s := range plan.Start {
					got = append(got, s.Slot)
				}
				if !slices.Equal(got, tc.slots) {
					t.Errorf("slots = %v, want %v", got, tc.slots)
				}
			}
			var drained []string
			for _, d := range plan.Drain {
				drained = append(drained, d.Name)
				if tc.drainReason != "" && d.Reason != tc.drainReason && d.Reason != DrainOutdated {
					t.Errorf("drain %s reason %q, want %q", d.Name, d.Reason, tc.drainReason)
				}
			}
			if !slices.Equal(drained, tc.drain) {
				t.Errorf("drain = %v, want %v (%s)", drained, tc.drain, plan.Why)
			}
			if plan.ScaleOut != tc.scaleOut {
				t.Errorf("scaleOut = %v, want %v", plan.ScaleOut, tc.scaleOut)
			}
			if !plan.WakeAt.Equal(tc.wakeAt) {
				t.Errorf("wakeAt = %v, want %v", plan.WakeAt, tc.wakeAt)
			}
			for _, d := range plan.Drain {
				for _, r := range tc.in.Runners {
					if r.Name == d.Name && (r.State == RunnerBusy || r.Busy) {
						t.Errorf("busy runner %s chosen for drain", r.Name)
					}
				}
			}
		})
	}
}

// Invariants over many generated pools: whatever the state, a plan never drains a busy runner,
// never pushes the runners holding capacity above max, and never puts two runners in one slot.
func TestDecideInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	states := []RunnerState{RunnerPending, RunnerRegistering, RunnerIdle, RunnerBusy, RunnerDraining}
	for i := range 5000 {
		maxR := rng.IntN(6)
		d := decIn(rng.IntN(maxR+1), maxR)
		d.Reservations, d.Bounds.MinIdle, d.Stateful = rng.IntN(8), rng.IntN(maxR+1), rng.IntN(2) == 0
		d.Mode = []PoolMode{PoolActive, PoolActive, PoolPaused, PoolDraining}[rng.IntN(4)]
		d.LastDesired, d.LastScaleOut = rng.IntN(6), decideNow.Add(-time.Duration(rng.IntN(20))*time.Minute)
		used := map[int]bool{}
		for seq := range int64(rng.IntN(maxR + 1)) {
			r := decRunner(seq+1, states[rng.IntN(len(states))], []string{decHashNew, decHashOld}[rng.IntN(2)])
			r.Draining = rng.IntN(4) == 0
			if d.Stateful {
				r.Stateful, r.Slot = true, int(seq)
				used[r.Slot] = true
			}
			d.Runners = append(d.Runners, r)
		}
		plan := Decide(d)
		v := classify(d)
		occupied := v.occupied
		for _, dr := range plan.Drain {
			r := d.Runners[slices.IndexFunc(d.Runners, func(r PoolRunner) bool { return r.Name == dr.Name })]
			if r.State == RunnerBusy || r.Busy || r.Draining {
				t.Fatalf("case %d: drained busy or already leaving runner %+v", i, r)
			}
			occupied--
		}
		if d.Mode == PoolPaused && (len(plan.Drain) > 0 || len(plan.Start) > 0) {
			t.Fatalf("case %d: paused pool changed: %+v", i, plan)
		}
		if len(plan.Start) > 0 && occupied+len(plan.Start) > maxR {
			t.Fatalf("case %d: %d holding capacity + %d starts > max %d", i, occupied, len(plan.Start), maxR)
		}
		for _, s := range plan.Start {
			if d.Stateful && (used[s.Slot] || s.Slot >= maxR) {
				t.Fatalf("case %d: start into used or out-of-range slot %d", i, s.Slot)
			}
			used[s.Slot] = true
		}
	}
}
