package jobgraph

import (
	"reflect"
	"testing"

	"github.com/runnerflow/runnerflow/workflows"
)

func TestRunGraphOfPipeline(t *testing.T) {
	g, err := Parse([]byte(pipeline))
	if err != nil {
		t.Fatal(err)
	}
	want := workflows.RunGraph{Jobs: []workflows.RunGraphJob{
		{ID: "lint", Labels: []string{"self-hosted", "linux"}, LabelsKnown: true, Instances: 1},
		{ID: "test", Labels: []string{"self-hosted", "linux"}, LabelsKnown: true, Instances: 1},
		{ID: "build", Name: "Build image", Needs: []string{"lint", "test"}, Labels: []string{"self-hosted", "linux", "large"}, LabelsKnown: true, Instances: 1},
		{ID: "deploy", Needs: []string{"build"}, Labels: []string{"self-hosted", "deploy"}, LabelsKnown: true, Instances: 4},
	}}
	if got := g.RunGraph(); !reflect.DeepEqual(got, want) {
		t.Fatalf("run graph:\n got %+v\nwant %+v", got, want)
	}
}

// TestRunGraphKeepsTheUnknown: what only the run can tell reaches the prediction as unknown,
// never as a guess (an expression's text taken for a label, a zero-sized matrix for one job).
func TestRunGraphKeepsTheUnknown(t *testing.T) {
	src := `on: push
jobs:
  plan:
    runs-on: linux
    steps: [{run: x}]
  sized:
    needs: plan
    runs-on: [self-hosted, '${{ inputs.size }}']
    steps: [{run: x}]
  fanned:
    needs: plan
    if: github.ref == 'refs/heads/main'
    runs-on: linux
    strategy:
      matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}
    steps: [{run: x}]
`
	g, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rg := g.RunGraph()
	sized, fanned := rg.Jobs[1], rg.Jobs[2]
	if sized.LabelsKnown || sized.Labels != nil || sized.Instances != 1 {
		t.Errorf("sized: %+v, want labels unknown and none given, one instance", sized)
	}
	if !fanned.LabelsKnown || fanned.Instances != 0 || fanned.If != "github.ref == 'refs/heads/main'" {
		t.Errorf("fanned: %+v, want labels known, instances unknown (0), its if:", fanned)
	}
	g.Jobs[1].Needs[0] = "changed"
	if rg.Jobs[1].Needs[0] != "plan" {
		t.Errorf("the run graph shares its needs with the parsed graph: %v", rg.Jobs[1].Needs)
	}
}
