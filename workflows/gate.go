package workflows

import "go.temporal.io/sdk/workflow"

// gate is one change (workflow.GetVersion) asked at most once per run, when the code first
// needs its answer, and kept for the rest of the run. Where a change is first asked is where
// its marker stands in the history, so a gate never asks ahead of that need; asking once also
// keeps the answer in reach of handlers and the loop alike.
type gate struct {
	// ask is the change's one GetVersion call, a function beside the change's constant
	// (askPullScaling beside changePullScaling): the change id stands at the call, where
	// changes_test.go reads it.
	ask   func(workflow.Context) workflow.Version
	asked bool
	on    bool
}

// inForce reports whether the change is in force in this run (version 1), asking it the first
// time only.
func (g *gate) inForce(ctx workflow.Context) bool {
	if !g.asked {
		g.on, g.asked = g.ask(ctx) >= 1, true
	}
	return g.on
}
