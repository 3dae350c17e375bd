package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// DecideInput is everything the pool's scaling decision depends on. Decide reads nothing else.
type DecideInput struct {
	Now    time.Time
	Bounds Bounds
	// Reservations is the number of active reservations (queued jobs holding capacity).
	Reservations int
	// BusyElsewhere counts runners busy with a job this pool holds no active reservation for
	// (another pool's job their labels fit, or a job that outlived its reservation): they serve
	// none of this pool's reservations, so the reservations need runners besides them.
	BusyElsewhere int
	Mode          PoolMode
	// TemplateHash is the current spec's; runners made from another hash are outdated.
	TemplateHash string
	// Stateful pools give each runner a slot in [0, max); a slot takes a new runner only once
	// the previous runner in it has ended, so its claims are never mounted twice.
	Stateful bool
	// Runners are the pool's live runners (terminal ones already removed).
	Runners []PoolRunner
	// LastDesired and LastScaleOut implement the scale-down delay: no idle runner is drained
	// for a lower desired count within ScaleDownDelay of the last time desired went up.
	LastDesired    int
	LastScaleOut   time.Time
	ScaleDownDelay time.Duration
	// StartNotBefore holds back starts after failed runners (backoff).
	StartNotBefore time.Time
	// Demand, for a pool that learns its demand from more than its reservations (a pull section:
	// DecidePull; a scale set: ScaleSetDemand), is what that source says the pool wants: it
	// replaces the count of reservations and busy runners, which it includes. Nil: Reservations
	// and BusyElsewhere are the demand.
	Demand *Demand
	// Predicted is the runners a prewarming pool warms for jobs it predicts GitHub will queue
	// soon (PlanPrewarm): added to the reservations, after them (never ahead of a queued
	// job) and within the max. Not with a Demand (a pull or a scale set does not prewarm).
	Predicted int
	// Released is the runners warmed for predictions that failed that are not let go yet:
	// they are drained even within the scale-down delay, which exists for a burst's runners,
	// not for a prediction's.
	Released int
}

// Demand is what a pool's source of demand says the pool wants: Want before the bounds clamp it
// (Decide does), the pull's busy metric's Target to keep, and Why for the decision log.
type Demand struct {
	Want   int
	Target int
	Why    string
	// StartsHeld, when set, says until when no runner may start whatever the count (a scale
	// set's pool before its set exists).
	StartsHeld string
}

// Plan is what the pool does now: start these runners, drain those. The workflow executes it.
type Plan struct {
	Desired int
	// Start lists the new runners; Slot is meaningful only for stateful pools.
	Start []StartRunner
	Drain []DrainRunner
	// ScaleOut is true when desired went up: the scale-down delay restarts now.
	ScaleOut bool
	// WakeAt is when a held-back action becomes possible (zero: nothing held back by time).
	WakeAt time.Time
	// Why explains desired and anything held back, for the decision log.
	Why string
	// Released is how many of DecideInput.Released are still to be let go after this plan:
	// those not drained now (while no runner is surplus, all of them: a job queued for a
	// runner that is leaving holds one until its reservation ends).
	Released int
}

// StartRunner is one runner to start.
type StartRunner struct {
	Slot int `json:"slot"`
}

// DrainRunner is one runner to drain, and why.
type DrainRunner struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Drain reasons, as the runner and the decision log see them.
const (
	DrainOutdated  = "outdated template"
	DrainScaleDown = "scale down"
	DrainPool      = "pool draining"
)

// Decide computes the pool's plan. The rules:
//   - desired = clamp(max(min + reservations + busy elsewhere, busy + minIdle), min, max); 0
//     while draining (busy elsewhere: runners busy with jobs this pool holds no reservation for);
//   - paused: nothing changes;
//   - rollout: outdated runners that are not busy are drained at once; busy outdated runners
//     finish their job and are replaced afterwards (an ephemeral runner ends by itself, a
//     persistent one is drained when it reports idle) — a busy runner is never drained;
//   - force-removed runners hold their place until they have ended: no replacement starts
//     for one (nor into its slot) while it is leaving;
//   - scale up: start runners until the runners that stay (current ones plus busy outdated
//     ones) reach desired, while the runners that hold capacity (all but idle ones already
//     leaving) stay within max, and — stateful pools — only into free slots;
//   - scale down: drain surplus runners that are not busy, least ready first (pending, then
//     registering, then idle), newest first within a state; held back within the scale-down
//     delay after a scale-out, except down to max and while draining the pool.
func Decide(in DecideInput) Plan {
	v := classify(in)
	desired, why := desiredCount(in, v.busy)
	plan := Plan{Desired: desired, ScaleOut: desired > in.LastDesired, Why: why, Released: in.Released}
	if in.Mode == PoolPaused {
		plan.ScaleOut = false
		plan.Why += "; paused: no changes"
		return plan
	}
	for _, r := range v.outdatedIdle {
		plan.Drain = append(plan.Drain, DrainRunner{Name: r.Name, Reason: DrainOutdated})
	}
	// Outdated idle runners leave now: their capacity goes to their replacements at once.
	v.occupied -= len(v.outdatedIdle)
	staying := len(v.current) + v.outdatedBusy
	if v.removing > 0 {
		plan.Why += fmt.Sprintf("; %d force-removed runner(s) hold their place until they end", v.removing)
	}
	switch {
	case staying > desired:
		plan.scaleDown(in, v, staying-desired)
	case staying+v.removing < desired:
		// A force-removed runner is replaced only once it has ended: until then it holds its
		// place (and its slot), though it is not kept against a scale-down of the others.
		plan.scaleUp(in, v, desired-staying-v.removing)
	}
	if in.Demand != nil && in.Demand.StartsHeld != "" && len(plan.Start) > 0 {
		plan.Start = nil
		plan.Why += "; starts held " + in.Demand.StartsHeld
	}
	return plan
}

// view sorts the pool's runners for one decision.
type view struct {
	// current: on the current template and not leaving.
	current []PoolRunner
	// outdatedIdle: on an old template, not busy, not leaving — drained by the rollout.
	outdatedIdle []PoolRunner
	// outdatedBusy counts busy runners on an old template that are not leaving yet.
	outdatedBusy int
	busy         int
	// occupied counts runners that hold capacity: all but idle runners already leaving.
	occupied int
	// removing counts force-removed runners still leaving: each holds its place.
	removing  int
	usedSlots map[int]bool
}

func classify(in DecideInput) view {
	v := view{usedSlots: map[int]bool{}}
	for _, r := range in.Runners {
		if r.State.Terminal() {
			continue
		}
		// A runner whose job completed (JobDone) is leaving and runs nothing, but its pod holds
		// its capacity until it ends.
		busy := (r.State == RunnerBusy || r.Busy) && !r.JobDone
		leaving := r.Draining || r.State == RunnerDraining || r.Removing || r.JobDone
		if busy {
			v.busy++
		}
		if !leaving || busy || r.Removing || r.JobDone {
			v.occupied++
		}
		if r.Removing {
			v.removing++
		}
		if r.Stateful {
			v.usedSlots[r.Slot] = true
		}
		switch {
		case leaving:
		case r.TemplateHash == in.TemplateHash:
			v.current = append(v.current, r)
		case busy:
			v.outdatedBusy++
		default:
			v.outdatedIdle = append(v.outdatedIdle, r)
		}
	}
	return v
}

func desiredCount(in DecideInput, busy int) (int, string) {
	b := in.Bounds
	if in.Mode == PoolDraining {
		return 0, "pool draining: desired 0"
	}
	if in.Demand != nil {
		desired := min(max(in.Demand.Want, b.Min), b.Max)
		return desired, fmt.Sprintf("desired %d = clamp(%s, %d, %d)", desired, in.Demand.Why, b.Min, b.Max)
	}
	demand := b.Min + in.Reservations + in.BusyElsewhere
	// Predicted runners take only the room the queued jobs leave.
	predicted := min(max(in.Predicted, 0), max(b.Max-demand, 0))
	want := max(demand+predicted, busy+b.MinIdle)
	desired := min(max(want, b.Min), b.Max)
	elsewhere := ""
	if in.BusyElsewhere > 0 {
		elsewhere = fmt.Sprintf(" + busy elsewhere %d", in.BusyElsewhere)
	}
	if in.Predicted > 0 {
		elsewhere += fmt.Sprintf(" + predicted %d", predicted)
		if predicted < in.Predicted {
			elsewhere += fmt.Sprintf(" (of %d: the queued jobs come first)", in.Predicted)
		}
	}
	why := fmt.Sprintf("desired %d = clamp(max(min %d + reservations %d%s, busy %d + minIdle %d), %d, %d)",
		desired, b.Min, in.Reservations, elsewhere, busy, b.MinIdle, b.Min, b.Max)
	return desired, why
}

func (p *Plan) scaleDown(in DecideInput, v view, surplus int) {
	if in.Mode != PoolDraining && !in.LastScaleOut.IsZero() {
		if until := in.LastScaleOut.Add(in.ScaleDownDelay); in.Now.Before(until) && !p.ScaleOut {
			overMax := len(v.current) + v.outdatedBusy - in.Bounds.Max
			switch {
			case overMax <= 0 && in.Released <= 0:
				p.WakeAt = until
				p.Why += fmt.Sprintf("; scale-down held until %s (scale-down delay)", until.UTC().Format(time.RFC3339))
				return
			case overMax <= 0:
				p.WakeAt = until
				p.Why += fmt.Sprintf("; scale-down held until %s (scale-down delay) but for runners warmed for predictions that failed", until.UTC().Format(time.RFC3339))
				surplus = min(in.Released, surplus)
			default:
				surplus = max(overMax, min(in.Released, surplus))
			}
		}
	}
	reason := DrainScaleDown
	if in.Mode == PoolDraining {
		reason = DrainPool
	}
	candidates := slices.DeleteFunc(slices.Clone(v.current), func(r PoolRunner) bool { return r.State == RunnerBusy || r.Busy })
	slices.SortFunc(candidates, func(a, b PoolRunner) int {
		return cmp.Or(cmp.Compare(readiness(a.State), readiness(b.State)), cmp.Compare(b.Seq, a.Seq))
	})
	before := len(p.Drain)
	for _, r := range candidates[:min(surplus, len(candidates))] {
		p.Drain = append(p.Drain, DrainRunner{Name: r.Name, Reason: reason})
	}
	p.Released = max(in.Released-(len(p.Drain)-before), 0)
}

// readiness orders runners for scale-down: the least ready go first, so capacity that can
// already take a job is kept.
func readiness(s RunnerState) int {
	switch s {
	case RunnerPending:
		return 0
	case RunnerRegistering:
		return 1
	}
	return 2
}

func (p *Plan) scaleUp(in DecideInput, v view, want int) {
	room := in.Bounds.Max - v.occupied
	n := min(want, max(room, 0))
	if n < want {
		p.Why += fmt.Sprintf("; %d start(s) wait for capacity (max %d, %d runners hold capacity)", want-n, in.Bounds.Max, v.occupied)
	}
	if n > 0 && in.Now.Before(in.StartNotBefore) {
		p.WakeAt = in.StartNotBefore
		p.Why += fmt.Sprintf("; starts held until %s after failed runners", in.StartNotBefore.UTC().Format(time.RFC3339))
		return
	}
	if !in.Stateful {
		for range n {
			p.Start = append(p.Start, StartRunner{})
		}
		return
	}
	for slot := 0; slot < in.Bounds.Max && len(p.Start) < n; slot++ {
		if !v.usedSlots[slot] {
			p.Start = append(p.Start, StartRunner{Slot: slot})
		}
	}
	if len(p.Start) < n {
		p.Why += fmt.Sprintf("; %d start(s) wait for a slot to be freed", n-len(p.Start))
	}
}
