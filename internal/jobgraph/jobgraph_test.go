package jobgraph

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// pipeline is issue 39's run: lint and test, then build (needs both), then a 4-way matrix
// deploy.
const pipeline = `
name: CI
on: push
jobs:
  lint:
    runs-on: [self-hosted, linux]
    steps: [{run: make lint}]
  test:
    runs-on: [self-hosted, linux]
    steps: [{run: make test}]
  build:
    name: Build image
    needs: [lint, test]
    runs-on: [self-hosted, linux, large]
    steps: [{run: make build}]
  deploy:
    needs: build
    runs-on:
      group: deployers
      labels: [self-hosted, deploy]
    strategy:
      matrix:
        region: [eu, us]
        tier: [web, api]
    steps: [{run: make deploy}]
`

func TestParsePipeline(t *testing.T) {
	g, err := Parse([]byte(pipeline))
	if err != nil {
		t.Fatal(err)
	}
	want := &Graph{Name: "CI", Jobs: []Job{
		{ID: "lint", Name: "lint", Labels: labels("self-hosted", "linux"), Matrix: Matrix{Size: 1}},
		{ID: "test", Name: "test", Labels: labels("self-hosted", "linux"), Matrix: Matrix{Size: 1}},
		{ID: "build", Name: "Build image", Needs: []string{"lint", "test"}, Labels: labels("self-hosted", "linux", "large"), Matrix: Matrix{Size: 1}},
		{ID: "deploy", Name: "deploy", Needs: []string{"build"}, Labels: labels("self-hosted", "deploy"), Group: "deployers", Matrix: Matrix{Size: 4}},
	}}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("graph:\n got %+v\nwant %+v", g, want)
	}
	if j, ok := g.Job("BUILD"); !ok || j.Name != "Build image" {
		t.Errorf("Job(BUILD) = %+v, %v; want build, found case-insensitively", j, ok)
	}
	if _, ok := g.Job("nope"); ok {
		t.Error("Job(nope) found a job")
	}
}

func labels(vs ...string) []Label {
	out := make([]Label, len(vs))
	for i, v := range vs {
		out[i] = Label{Value: v}
	}
	return out
}

// oneJob wraps a job body (indented by four spaces) into a workflow with the job "j".
func oneJob(body string) string {
	return "on: push\njobs:\n  j:\n" + body + "    steps: [{run: x}]\n"
}

func TestParseMatrixSizes(t *testing.T) {
	cases := []struct {
		name   string
		matrix string
		want   Matrix
	}{
		{"no matrix", "", Matrix{Size: 1}},
		{"one row", "        os: [a, b, c]\n", Matrix{Size: 3}},
		{"product", "        os: [a, b]\n        v: [1, 2, 3]\n", Matrix{Size: 6}},
		{"exclude removes a combination", "        os: [a, b]\n        v: [1, 2]\n        exclude:\n          - {os: a, v: 1}\n", Matrix{Size: 3}},
		{"partial exclude removes every match", "        os: [a, b]\n        v: [1, 2]\n        exclude:\n          - {os: a}\n", Matrix{Size: 2}},
		{"include merged into a combination adds none", "        os: [a, b]\n        include:\n          - {os: a, extra: x}\n", Matrix{Size: 2}},
		{"include with a new value adds one", "        os: [a, b]\n        include:\n          - {os: c}\n", Matrix{Size: 3}},
		{"include of new keys only merges into all", "        os: [a, b]\n        include:\n          - {color: green}\n", Matrix{Size: 2}},
		{"include alone", "        include:\n          - {os: a}\n          - {os: b}\n", Matrix{Size: 2}},
		{"whole matrix is an expression", "        ${{ fromJSON(needs.plan.outputs.matrix) }}\n", Matrix{Unknown: true}},
		{"a row is an expression", "        os: ${{ fromJSON(vars.OSES) }}\n", Matrix{Unknown: true}},
		{"an include value is an expression", "        os: [a]\n        include:\n          - {os: '${{ vars.OS }}'}\n", Matrix{Unknown: true}},
		{"exclude is an expression", "        os: [a, b]\n        exclude: ${{ fromJSON(vars.SKIP) }}\n", Matrix{Unknown: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := "    runs-on: linux\n"
			if tc.matrix != "" {
				if strings.HasPrefix(tc.matrix, "        ${{") {
					body += "    strategy:\n      matrix: " + strings.TrimSpace(tc.matrix) + "\n"
				} else {
					body += "    strategy:\n      matrix:\n" + tc.matrix
				}
			}
			g, err := Parse([]byte(oneJob(body)))
			if err != nil {
				t.Fatalf("Parse:\n%s\n%v", oneJob(body), err)
			}
			if got := g.Jobs[0].Matrix; got != tc.want {
				t.Fatalf("matrix %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseRunsOnExpressions(t *testing.T) {
	cases := []struct {
		name          string
		runsOn        string
		labels        []Label
		labelsUnknown bool
	}{
		{"plain label", "runs-on: linux", labels("linux"), false},
		{"one label an expression", "runs-on: [self-hosted, '${{ inputs.size }}']", []Label{{Value: "self-hosted"}, {Value: "${{ inputs.size }}", Unknown: true}}, false},
		{"runs-on an expression", "runs-on: ${{ matrix.os }}", nil, true},
		{"a reusable workflow has no runs-on", "uses: acme/wf/.github/workflows/x.yml@main", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := "on: push\njobs:\n  j:\n    " + tc.runsOn + "\n"
			if !strings.HasPrefix(tc.runsOn, "uses:") {
				src += "    steps: [{run: x}]\n"
			}
			g, err := Parse([]byte(src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			j := g.Jobs[0]
			if !reflect.DeepEqual(j.Labels, tc.labels) || j.LabelsUnknown != tc.labelsUnknown {
				t.Fatalf("labels %+v unknown=%v, want %+v unknown=%v", j.Labels, j.LabelsUnknown, tc.labels, tc.labelsUnknown)
			}
			wantKnown := !tc.labelsUnknown && !strings.Contains(tc.runsOn, "${{")
			if j.LabelsKnown() != wantKnown {
				t.Fatalf("LabelsKnown() = %v, want %v", j.LabelsKnown(), wantKnown)
			}
		})
	}
}

func TestParseRefusesBrokenFiles(t *testing.T) {
	cases := []struct {
		name, src, mention string
	}{
		{"not YAML", "on: push\njobs:\n  j: [unclosed\n", "line "},
		{"jobs is not a mapping", "on: push\njobs: 3\n", "line 2"},
		{"needs an unknown job", "on: push\njobs:\n  a:\n    needs: ghost\n    runs-on: linux\n    steps: [{run: x}]\n", `"ghost"`},
		{"needs form a cycle", "on: push\njobs:\n  a:\n    needs: b\n    runs-on: linux\n    steps: [{run: x}]\n  b:\n    needs: a\n    runs-on: linux\n    steps: [{run: x}]\n", "cycle"},
		{"empty file", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse([]byte(tc.src))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", g)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q: want ErrInvalid mentioning %q", err, tc.mention)
			}
		})
	}
}

func TestParseNamesAndConditions(t *testing.T) {
	src := `on: push
jobs:
  plain:
    runs-on: linux
    steps: [{run: x}]
  named:
    name: Deploy ${{ matrix.region }}
    if: github.ref == 'refs/heads/main'
    runs-on: linux
    steps: [{run: x}]
`
	g, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	plain, named := g.Jobs[0], g.Jobs[1]
	if plain.Name != "plain" || plain.NameUnknown || plain.If != "" {
		t.Errorf("plain: %+v, want its id as name, known, no condition", plain)
	}
	if named.Name != "Deploy ${{ matrix.region }}" || !named.NameUnknown || named.If != "github.ref == 'refs/heads/main'" {
		t.Errorf("named: %+v, want its name unknown and its condition", named)
	}
}
