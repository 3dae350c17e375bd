package workflows

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplaysRecordedHistories replays histories recorded from real runs against the real
// Temporal server by every earlier build (integration/runners, integration/pools and
// integration/jobs with RUNNERFLOW_RECORD_HISTORY=<build>, e.g. v2, write <name>-<build>.json; or
// `temporal workflow show --output json`): runners through their whole lifecycle, a pool run that
// continued as new and the run that took over, with operator signals and updates, runner
// reports and listings, pools whose runners took each other's jobs, scale windows, a reconcile
// run that removed orphans. A change to a workflow that issues different commands for an old
// history fails here: guard it with workflow.GetVersion.
func TestReplaysRecordedHistories(t *testing.T) {
	for _, wf := range []struct {
		glob string
		name string
		fn   any
	}{
		{"runner-*.json", RunnerWorkflowType, RunnerWorkflow},
		{"pool-*.json", PoolWorkflowType, PoolWorkflow},
		{"scale-window-*.json", ScaleWindowWorkflowType, ScaleWindowWorkflow},
		{"reconcile-*.json", ReconcileWorkflowType, ReconcileWorkflow},
	} {
		files, err := filepath.Glob(filepath.Join("testdata", wf.glob))
		if err != nil || len(files) == 0 {
			t.Fatalf("no recorded %s histories in testdata (%v)", wf.name, err)
		}
		for _, file := range files {
			t.Run(filepath.Base(file), func(t *testing.T) { replay(t, wf.name, wf.fn, file) })
		}
	}
}

func replay(t *testing.T, name string, fn any, file string) {
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, file); err != nil {
		t.Fatalf("replay %s: %v", file, err)
	}
}
