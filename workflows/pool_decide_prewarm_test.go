package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDecidePredictedRunners: runners warmed for predicted jobs add to the demand after the
// queued jobs and within max; runners of failed predictions go even within the scale-down
// delay, and only as many as were released; without either, Decide is what it was.
func TestDecidePredictedRunners(t *testing.T) {
	idle := func(seq int64) PoolRunner { return decRunner(seq, RunnerIdle, decHashNew) }
	recent := func(d *DecideInput) { d.LastScaleOut = decideNow.Add(-time.Minute) }
	cases := []struct {
		name     string
		in       DecideInput
		desired  int
		starts   int
		drain    []string
		released int
		wakeAt   time.Time
		why      string
		whyLacks string
	}{
		{name: "predicted runners start before their jobs are queued",
			in:      decWith(decIn(0, 5), func(d *DecideInput) { d.Predicted = 2 }),
			desired: 2, starts: 2, why: "+ predicted 2"},
		{name: "queued jobs come first: predictions take only the room left",
			in:      decWith(decIn(0, 5), func(d *DecideInput) { d.Reservations, d.Predicted = 4, 3 }),
			desired: 5, starts: 5, why: "+ predicted 1 (of 3: the queued jobs come first)"},
		{name: "no room at all: no predicted runner",
			in:      decWith(decIn(1, 3), func(d *DecideInput) { d.Reservations, d.BusyElsewhere, d.Predicted = 1, 1, 2 }),
			desired: 3, starts: 3, why: "+ predicted 0 (of 2"},
		{name: "without predictions the decision says nothing of them",
			in:      decWith(decIn(0, 5), func(d *DecideInput) { d.Reservations = 1 }),
			desired: 1, starts: 1, whyLacks: "predicted"},
		{name: "released runners go within the scale-down delay",
			in: decWith(decIn(0, 5, idle(1), idle(2), idle(3)), func(d *DecideInput) {
				recent(d)
				d.LastDesired, d.Reservations, d.Released = 3, 1, 2
			}),
			desired: 1, drain: []string{"r3", "r2"}, wakeAt: decideNow.Add(9 * time.Minute)},
		{name: "only as many as were released: the rest waits for the delay",
			in: decWith(decIn(0, 5, idle(1), idle(2), idle(3)), func(d *DecideInput) {
				recent(d)
				d.LastDesired, d.Released = 3, 1
			}),
			desired: 0, drain: []string{"r3"}, wakeAt: decideNow.Add(9 * time.Minute)},
		{name: "no runner surplus: nothing goes, the released are kept for when one is",
			in: decWith(decIn(0, 5, idle(1), idle(2)), func(d *DecideInput) {
				recent(d)
				d.LastDesired, d.Reservations, d.Released = 2, 2, 2
			}),
			desired: 2, released: 2},
		{name: "a busy runner is never released",
			in: decWith(decIn(0, 5, decRunner(1, RunnerBusy, decHashNew), idle(2)), func(d *DecideInput) {
				recent(d)
				d.LastDesired, d.Released = 2, 2
			}),
			desired: 1, drain: []string{"r2"}, released: 1, wakeAt: decideNow.Add(9 * time.Minute)},
		{name: "released while paused: kept for later",
			in: decWith(decIn(0, 5, idle(1)), func(d *DecideInput) {
				d.Mode, d.LastDesired, d.Released = PoolPaused, 1, 1
			}),
			desired: 0, released: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Decide(tc.in)
			var drained []string
			for _, d := range plan.Drain {
				drained = append(drained, d.Name)
			}
			if plan.Desired != tc.desired || len(plan.Start) != tc.starts || !slices.Equal(drained, tc.drain) {
				t.Errorf("desired %d, starts %d, drains %v; want %d, %d, %v (%s)", plan.Desired, len(plan.Start), drained, tc.desired, tc.starts, tc.drain, plan.Why)
			}
			if plan.Released != tc.released || !plan.WakeAt.Equal(tc.wakeAt) {
				t.Errorf("released left %d, wake %v; want %d, %v", plan.Released, plan.WakeAt, tc.released, tc.wakeAt)
			}
			if !strings.Contains(plan.Why, tc.why) || (tc.whyLacks != "" && strings.Contains(plan.Why, tc.whyLacks)) {
				t.Errorf("why %q: want it to say %q and not %q", plan.Why, tc.why, tc.whyLacks)
			}
		})
	}
}
