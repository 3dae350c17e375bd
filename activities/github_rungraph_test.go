package activities

import (
	"slices"
	"strings"
	"testing"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const pipelinePath = ".github/workflows/ci.yml"

// pipelineFile: lint and test, then build, then a deploy over a 4-way matrix.
const pipelineFile = `name: ci
on: push
jobs:
  lint:
    runs-on: [self-hosted, linux]
    steps: [{run: make lint}]
  test:
    runs-on: [self-hosted, linux]
    steps: [{run: make test}]
  build:
    needs: [lint, test]
    runs-on: [self-hosted, linux]
    steps: [{run: make build}]
  deploy:
    needs: build
    runs-on: [self-hosted, linux]
    strategy:
      matrix:
        region: [eu, us]
        app: [web, api]
    steps: [{run: make deploy}]
`

func (e *env) push(branch string, files map[string]string) string {
	e.t.Helper()
	sha, err := e.gh.PushFiles(githubdouble.PushSpec{Repository: "acme/app", Branch: branch, Files: files})
	if err != nil {
		e.t.Fatal(err)
	}
	return sha
}

func (e *env) readRunGraph(in workflows.ReadRunGraphInput) (workflows.ReadRunGraphResult, int) {
	e.t.Helper()
	before := e.gh.TotalCalls()
	out, err := e.gha.ReadRunGraph(e.ctx, in)
	if err != nil {
		e.t.Fatalf("ReadRunGraph: %v", err)
	}
	return out, e.gh.TotalCalls() - before
}

func checkPipeline(t *testing.T, out workflows.ReadRunGraphResult) {
	t.Helper()
	if out.Graph == nil {
		t.Fatalf("no graph (%q)", out.NoGraph)
	}
	byID := map[string]workflows.RunGraphJob{}
	for _, j := range out.Graph.Jobs {
		byID[j.ID] = j
	}
	if len(byID) != 4 {
		t.Fatalf("jobs %+v, want lint, test, build, deploy", out.Graph.Jobs)
	}
	if b := byID["build"]; !slices.Equal(slices.Sorted(slices.Values(b.Needs)), []string{"lint", "test"}) {
		t.Errorf("build needs %v", b.Needs)
	}
	if d := byID["deploy"]; d.Instances != 4 || !d.LabelsKnown || !slices.Equal(d.Needs, []string{"build"}) {
		t.Errorf("deploy %+v, want 4 instances after build", d)
	}
}

func TestReadRunGraphWithPathIsOneCall(t *testing.T) {
	e := newEnv(t)
	sha := e.push("", map[string]string{pipelinePath: pipelineFile})
	out, calls := e.readRunGraph(workflows.ReadRunGraphInput{Repository: "acme/app", HeadSHA: sha, Path: pipelinePath})
	checkPipeline(t, out)
	if calls != 1 || out.Calls != 1 {
		t.Errorf("double answered %d calls, result says %d; want 1", calls, out.Calls)
	}
	if strings.Contains(out.Path, "make") || out.Path != pipelinePath {
		t.Errorf("path %q", out.Path)
	}
}

func TestReadRunGraphWithoutPathReadsTheRunFirst(t *testing.T) {
	e := newEnv(t)
	sha := e.push("", map[string]string{pipelinePath: pipelineFile})
	run, err := e.gh.StartRun(githubdouble.RunSpec{Repository: "acme/app", Path: pipelinePath, Ref: sha})
	if err != nil {
		t.Fatal(err)
	}
	out, calls := e.readRunGraph(workflows.ReadRunGraphInput{Repository: "acme/app", HeadSHA: run.HeadSHA, RunID: run.ID})
	checkPipeline(t, out)
	if calls != 2 || out.Calls != 2 || out.Path != pipelinePath {
		t.Errorf("double answered %d calls, result says %d, path %q; want 2 and %s", calls, out.Calls, out.Path, pipelinePath)
	}
}

func TestReadRunGraphReadsTheRunsCommitNotTheBranchHead(t *testing.T) {
	e := newEnv(t)
	sha := e.push("", map[string]string{pipelinePath: pipelineFile})
	e.push("", map[string]string{pipelinePath: "name: ci\non: push\njobs:\n  only:\n    runs-on: linux\n    steps: [{run: true}]\n"})
	out, _ := e.readRunGraph(workflows.ReadRunGraphInput{Repository: "acme/app", HeadSHA: sha, Path: pipelinePath})
	checkPipeline(t, out)
}

func TestReadRunGraphSaysWhyThereIsNoGraph(t *testing.T) {
	e := newEnv(t)
	sha := e.push("", map[string]string{pipelinePath: "jobs: [this is not, a workflow"})
	out, _ := e.readRunGraph(workflows.ReadRunGraphInput{Repository: "acme/app", HeadSHA: sha, Path: pipelinePath})
	if out.Graph != nil || out.NoGraph != workflows.RunGraphInvalid {
		t.Errorf("unparseable file: %+v, want no graph, invalid", out)
	}
	big := e.push("", map[string]string{pipelinePath: pipelineFile + "# " + strings.Repeat("x", 1<<20) + "\n"})
	out, _ = e.readRunGraph(workflows.ReadRunGraphInput{Repository: "acme/app", HeadSHA: big, Path: pipelinePath})
	if out.Graph != nil || out.NoGraph != workflows.RunGraphTooLarge {
		t.Errorf("file over 1 MB: %+v, want no graph, too large", out)
	}
	out, _ = e.readRunGraph(workflows.ReadRunGraphInput{Repository: "acme/app", HeadSHA: sha, Path: ".github/workflows/gone.yml"})
	if out.Graph != nil || out.NoGraph != workflows.RunGraphNotFound {
		t.Errorf("missing file: %+v, want no graph, not found", out)
	}
}

// A path remembered from an earlier run that no longer holds the run's file — the workflow
// was moved, or another workflow took its path — costs the run's read one call more (three):
// the run is read for its path, and the result names the path read, for the pool to remember.
func TestReadRunGraphAtAStalePathReadsTheRun(t *testing.T) {
	e := newEnv(t)
	const other = ".github/workflows/other.yml"
	sha := e.push("", map[string]string{
		pipelinePath: pipelineFile,
		other:        "name: other\non: push\njobs:\n  only:\n    runs-on: linux\n    steps: [{run: true}]\n",
	})
	run, err := e.gh.StartRun(githubdouble.RunSpec{Repository: "acme/app", Path: pipelinePath, Ref: sha})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, path string }{
		{"moved: nothing at the path", ".github/workflows/old-ci.yml"},
		{"another workflow at the path", other},
	} {
		out, calls := e.readRunGraph(workflows.ReadRunGraphInput{
			Repository: "acme/app", HeadSHA: run.HeadSHA, RunID: run.ID, Path: tc.path, Workflow: run.Workflow,
		})
		checkPipeline(t, out)
		if calls != 3 || out.Calls != 3 || out.Path != pipelinePath {
			t.Errorf("%s: double answered %d calls, result says %d, path %q; want 3 and %s", tc.what, calls, out.Calls, out.Path, pipelinePath)
		}
	}
	// The run's own name at its own path: one call, the name checked against the file's.
	out, calls := e.readRunGraph(workflows.ReadRunGraphInput{
		Repository: "acme/app", HeadSHA: run.HeadSHA, RunID: run.ID, Path: pipelinePath, Workflow: run.Workflow,
	})
	checkPipeline(t, out)
	if calls != 1 || out.Calls != 1 || out.Path != pipelinePath {
		t.Errorf("known path: double answered %d calls, result says %d, path %q; want 1", calls, out.Calls, out.Path)
	}
	// Neither the path nor the run found: no graph, and no path read.
	out, calls = e.readRunGraph(workflows.ReadRunGraphInput{
		Repository: "acme/app", HeadSHA: run.HeadSHA, RunID: run.ID + 1000, Path: ".github/workflows/old-ci.yml",
	})
	if out.Graph != nil || out.NoGraph != workflows.RunGraphNotFound || out.Path != "" || calls != 2 || out.Calls != 2 {
		t.Errorf("stale path of an unknown run: %+v after %d calls; want not found, no path, 2 calls", out, calls)
	}
}
