package jobgraph

import (
	"slices"

	"github.com/runnerflow/runnerflow/workflows"
)

// RunGraph is the graph as a pool predicts from it (workflows.Predict): plain data that a
// workflow's history can hold, so that workflow code never imports this package and its
// parser. What cannot be known before the run stays unknown: labels with an expression give
// LabelsKnown false, a matrix with one gives zero instances.
func (g *Graph) RunGraph() workflows.RunGraph {
	out := workflows.RunGraph{Jobs: make([]workflows.RunGraphJob, 0, len(g.Jobs))}
	for _, j := range g.Jobs {
		rj := workflows.RunGraphJob{
			ID:          j.ID,
			Needs:       slices.Clone(j.Needs),
			LabelsKnown: j.LabelsKnown(),
			If:          j.If,
		}
		if j.Name != j.ID {
			rj.Name, rj.NameUnknown = j.Name, j.NameUnknown
		}
		if rj.LabelsKnown {
			rj.Labels = j.LabelValues()
		}
		if !j.Matrix.Unknown {
			rj.Instances = j.Matrix.Size
		}
		out.Jobs = append(out.Jobs, rj)
	}
	return out
}
