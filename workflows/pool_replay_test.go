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

// TestPoolReplaysRecordedHistories replays pool histories recorded from real runs against the
// real Temporal server (internal/poolintegration, RUNNERFLOW_RECORD_HISTORY=1): a run that
// continued as new and the run that took over, with operator signals and updates, runner
// reports and listings. A change to the pool workflow that issues different commands for an
// old history fails here: guard it with workflow.GetVersion.
func TestPoolReplaysRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "pool-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded pool histories in testdata (%v)", err)
	}
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			replayer.RegisterWorkflowWithOptions(PoolWorkflow, workflow.RegisterOptions{Name: PoolWorkflowType})
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, file); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
