package workflows

import (
	"fmt"
	"strings"
	"testing"
)

// heardRun is the state after one queued event of a run of the workflow in the repository.
func heardRun(st PrewarmState, repo string, runID int64, workflow string) PrewarmState {
	ev := prewarmEvent(JobQueued, runID*10, "lint", 0)
	ev.Repository, ev.RunID, ev.WorkflowName = repo, runID, workflow
	return ObservePrewarm(st, []WorkflowJobEvent{ev}, runStart)
}

// readAt records the run's graph read: found at path (a graph), or the reason given.
func readAt(st PrewarmState, repo string, runID int64, path, noGraph, failure string) PrewarmState {
	res := ReadRunGraphResult{Path: path, NoGraph: noGraph, Calls: 2}
	if noGraph == "" && failure == "" {
		g := pipelineGraph()
		res.Graph = &g
	}
	return PrewarmGraphRead(st, repo, runID, res, failure)
}

// knownFor is the path KnownPath gives a new run of the workflow.
func knownFor(st PrewarmState, repo string, runID int64, workflow string) string {
	st = heardRun(st, repo, runID, workflow)
	return KnownPath(st, st.Runs[st.findRun(repo, runID)])
}

// TestKnownPath: a workflow's file is read at the path its last read found it at, by
// repository and workflow name; a path not found, a failed read, a name that may have been
// cut or a path too long to keep leave nothing to remember.
func TestKnownPath(t *testing.T) {
	const ci = ".github/workflows/ci.yml"
	longName := strings.Repeat("n", PrewarmSeenNameMax)
	for _, tc := range []struct {
		what                    string
		workflow, path, noGraph string
		failure                 string
		askRepo, askWorkflow    string
		want                    string
	}{
		{what: "read with a graph", workflow: "CI", path: ci, askRepo: prewarmRepo, askWorkflow: "CI", want: ci},
		{what: "found but not parsed", workflow: "CI", path: ci, noGraph: RunGraphInvalid, askRepo: prewarmRepo, askWorkflow: "CI", want: ci},
		{what: "found but too large", workflow: "CI", path: ci, noGraph: RunGraphTooLarge, askRepo: prewarmRepo, askWorkflow: "CI", want: ci},
		{what: "not found", workflow: "CI", path: ci, noGraph: RunGraphNotFound, askRepo: prewarmRepo, askWorkflow: "CI"},
		{what: "read failed", workflow: "CI", path: ci, failure: "rate limited", askRepo: prewarmRepo, askWorkflow: "CI"},
		{what: "no path read", workflow: "CI", askRepo: prewarmRepo, askWorkflow: "CI"},
		{what: "another workflow of the repository", workflow: "CI", path: ci, askRepo: prewarmRepo, askWorkflow: "Release"},
		{what: "the same workflow name in another repository", workflow: "CI", path: ci, askRepo: "acme/other", askWorkflow: "CI"},
		{what: "a workflow name that may have been cut", workflow: longName, path: ci, askRepo: prewarmRepo, askWorkflow: longName},
		{what: "a path over PrewarmPathMax", workflow: "CI", path: ".github/workflows/" + strings.Repeat("p", PrewarmPathMax), askRepo: prewarmRepo, askWorkflow: "CI"},
		{what: "no workflow name heard", path: ci, askRepo: prewarmRepo},
	} {
		st := heardRun(PrewarmState{}, prewarmRepo, 1, tc.workflow)
		st = readAt(st, prewarmRepo, 1, tc.path, tc.noGraph, tc.failure)
		if got := knownFor(st, tc.askRepo, 2, tc.askWorkflow); got != tc.want {
			t.Errorf("%s: known path %q, want %q", tc.what, got, tc.want)
		}
	}
}

// TestKnownPathFollowsAMove: a read that found the file elsewhere (the activity fell back to
// the run's path) replaces the path remembered; the state given is not modified.
func TestKnownPathFollowsAMove(t *testing.T) {
	st := readAt(heardRun(PrewarmState{}, prewarmRepo, 1, "CI"), prewarmRepo, 1, ".github/workflows/ci.yml", "", "")
	before := heardRun(st, prewarmRepo, 2, "CI")
	moved := readAt(before, prewarmRepo, 2, ".github/workflows/build.yml", "", "")
	if got := knownFor(moved, prewarmRepo, 3, "CI"); got != ".github/workflows/build.yml" || len(moved.Paths) != 1 {
		t.Errorf("after the move: known path %q of %d remembered, want the new one alone", got, len(moved.Paths))
	}
	if got := knownFor(before, prewarmRepo, 3, "CI"); got != ".github/workflows/ci.yml" {
		t.Errorf("the state given changed: known path %q", got)
	}
}

// TestKnownPathBounded: at most PrewarmPathsKept paths are remembered; the least recently
// read goes first, and a read moves its workflow to the most recent.
func TestKnownPathBounded(t *testing.T) {
	var st PrewarmState
	read := func(runID int64, workflow string) {
		st = heardRun(st, prewarmRepo, runID, workflow)
		st = readAt(st, prewarmRepo, runID, ".github/workflows/"+workflow+".yml", "", "")
		st = st.forget(runStart.Add(2 * PrewarmRunIdleForget)) // keep the runs from bounding anything
	}
	for i := range PrewarmPathsKept {
		read(int64(i+1), fmt.Sprintf("w%d", i))
	}
	read(100, "w0") // read again: now the most recent
	read(101, "new")
	if len(st.Paths) != PrewarmPathsKept {
		t.Fatalf("%d paths remembered, want %d", len(st.Paths), PrewarmPathsKept)
	}
	for w, want := range map[string]string{"w0": ".github/workflows/w0.yml", "w1": "", "w2": ".github/workflows/w2.yml", "new": ".github/workflows/new.yml"} {
		if got := knownFor(st, prewarmRepo, 200, w); got != want {
			t.Errorf("%s: known path %q, want %q", w, got, want)
		}
	}
}
