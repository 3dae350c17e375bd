package workflows

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/workflow"
)

// A source's Demand may hold starts whatever the count (a scale set not there yet): the plan
// starts nothing and says why, and still drains what it would drain.
func TestDecideHoldsStartsTheDemandHolds(t *testing.T) {
	cases := []struct {
		name   string
		in     DecideInput
		starts int
		drains int
		held   bool
	}{
		{name: "held: no starts", in: decWith(decIn(0, 5), func(d *DecideInput) {
			d.Demand = &Demand{Want: 3, Why: "scale set: 3", StartsHeld: "until the scale set exists"}
		}), held: true},
		{name: "not held: starts", in: decWith(decIn(0, 5), func(d *DecideInput) {
			d.Demand = &Demand{Want: 3, Why: "scale set: 3"}
		}), starts: 3},
		{name: "held, nothing to start: the why says nothing of it", in: decWith(decIn(0, 5, decRunner(1, RunnerIdle, decHashNew)), func(d *DecideInput) {
			d.Demand = &Demand{Want: 1, Why: "scale set: 1", StartsHeld: "until the scale set exists"}
			d.LastDesired = 1
		})},
		{name: "held: outdated runners still drain", in: decWith(decIn(0, 5, decRunner(1, RunnerIdle, "old")), func(d *DecideInput) {
			d.Demand = &Demand{Want: 1, Why: "scale set: 1", StartsHeld: "until the scale set exists"}
		}), drains: 1, held: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(c.in)
			if len(p.Start) != c.starts || len(p.Drain) != c.drains {
				t.Errorf("starts %d, drains %d; want %d, %d (%s)", len(p.Start), len(p.Drain), c.starts, c.drains, p.Why)
			}
			if got := strings.Contains(p.Why, "; starts held until the scale set exists"); got != c.held {
				t.Errorf("why %q: says starts are held %t, want %t", p.Why, got, c.held)
			}
		})
	}
}

// A gate asks its change the first time only, and keeps the answer.
func TestGateAsksOnceAndKeepsTheAnswer(t *testing.T) {
	for _, v := range []workflow.Version{workflow.DefaultVersion, 1} {
		asked := 0
		g := gate{ask: func(workflow.Context) workflow.Version { asked++; return v }}
		for range 3 {
			if on := g.inForce(nil); on != (v >= 1) {
				t.Errorf("version %d: in force %t", v, on)
			}
		}
		if asked != 1 {
			t.Errorf("version %d: asked %d times, want once", v, asked)
		}
	}
}

// The source of demand follows the spec: a scale set's, a pull's (also while a removed pull
// still has state to wind down), else webhooks alone; an applied pull section turns a webhook
// pool into a pull pool, and a pull pool stays one for the run.
func TestChooseDemandFollowsTheSpec(t *testing.T) {
	kind := func(d demandSource) string {
		switch d.(type) {
		case *scaleSetDemand:
			return "scale set"
		case *pullDemand:
			return "pull"
		case webhooksOnly:
			return "webhooks"
		}
		return "?"
	}
	cases := []struct {
		name string
		st   PoolState
		want string
	}{
		{"webhooks", PoolState{}, "webhooks"},
		{"pull section", PoolState{Spec: PoolSpec{Pull: &PullSpec{}}}, "pull"},
		{"pull removed, shared demands left", PoolState{Pull: &PullState{Demanded: []PullDemanded{{Repository: "a/b"}}}}, "pull"},
		{"scale set", PoolState{Spec: PoolSpec{ScaleSet: &ScaleSetSpec{}}}, "scale set"},
	}
	for _, c := range cases {
		p := &poolRun{st: c.st}
		if got := kind(p.chooseDemand()); got != c.want {
			t.Errorf("%s: chose %s, want %s", c.name, got, c.want)
		}
	}

	p := &poolRun{}
	p.demand = p.chooseDemand()
	p.st.Spec.Pull = &PullSpec{}
	p.followSpec()
	if got := kind(p.demand); got != "pull" {
		t.Fatalf("webhook pool given a pull section: %s, want pull", got)
	}
	pulled := p.demand
	p.st.Spec.Pull = nil
	p.followSpec()
	if p.demand != pulled {
		t.Errorf("pull section removed: the source changed within the run")
	}
}
