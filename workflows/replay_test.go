package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// replayGlobs names, per workflow type, the recorded histories in testdata that replay it.
// Files are <name>-<release>.json, written by `make record-histories RELEASE=<release>` (the
// integration tests with RUNNERFLOW_RECORD_HISTORY set) or `temporal workflow show --output
// json`; the builds before releases had names are v1 to v4, the releases of CHANGELOG.md.
var replayGlobs = map[string]string{
	RunnerWorkflowType:           "runner-*.json",
	PoolWorkflowType:             "pool-*.json",
	ScaleWindowWorkflowType:      "scale-window-*.json",
	ReconcileWorkflowType:        "reconcile-*.json",
	ScopeListingWorkflowType:     "scope-listing-*.json",
	RepoPullWorkflowType:         "repo-pull-*.json",
	UnmatchedJobsWorkflowType:    "unmatched-jobs-*.json",
	ScaleSetListenerWorkflowType: "scaleset-listener-*.json",
}

// TestReplaysRecordedHistories replays every history recorded from real runs against the real
// Temporal server by every earlier release: runners through their whole lifecycle, pool runs
// that continued as new and the runs that took over, with operator signals and updates, runner
// reports and listings, pools at rest, reading by pull and on named clusters, scale windows,
// scope listings and reconcile runs. A change to a workflow that issues different commands for
// an old history fails here: guard it with workflow.GetVersion and list it in Changes.
func TestReplaysRecordedHistories(t *testing.T) {
	for _, d := range Definitions {
		files, err := filepath.Glob(filepath.Join("testdata", replayGlobs[d.Name]))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			t.Run(filepath.Base(file), func(t *testing.T) { replay(t, d, file) })
		}
	}
}

// Every registered workflow type has a glob in replayGlobs that finds a recorded history.
func TestEveryWorkflowTypeHasRecordedHistories(t *testing.T) {
	for _, d := range Definitions {
		glob, ok := replayGlobs[d.Name]
		if !ok {
			t.Errorf("workflow type %q has no glob in replayGlobs", d.Name)
			continue
		}
		files, err := filepath.Glob(filepath.Join("testdata", glob))
		if err != nil || len(files) == 0 {
			t.Errorf("no recorded %s history in testdata/%s (%v): record one (make record-histories)", d.Name, glob, err)
		}
	}
}

func replay(t *testing.T, d Definition, file string) {
	replayUnderRecordedRestWaits(t, file)
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(d.Fn, workflow.RegisterOptions{Name: d.Name})
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, file); err != nil {
		t.Fatalf("replay %s: %v", file, err)
	}
}

// replayUnderRecordedRestWaits puts in force, for one replay, the waits at rest a history was
// recorded under when its world shortened them (<name>-<build>.rest-waits beside it): they
// decide when a pool wakes, so under production's lengths such a history can ask for other
// commands than it recorded (policy.go, "Waits at rest that a test world shortens").
func replayUnderRecordedRestWaits(t *testing.T, file string) {
	b, err := os.ReadFile(strings.TrimSuffix(file, ".json") + ".rest-waits")
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var waits RestWaits
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&waits); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	was := CurrentRestWaits()
	waits.Apply()
	t.Cleanup(was.Apply)
}
