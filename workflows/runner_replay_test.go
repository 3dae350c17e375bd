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

// TestRunnerReplaysRecordedHistories replays histories recorded from real runs against the real
// Temporal server (internal/integration, RUNNERFLOW_RECORD_HISTORY=1, exported with
// `temporal workflow show --output json`). A change to the runner workflow that issues
// different commands for an old history fails here: guard it with workflow.GetVersion.
func TestRunnerReplaysRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "runner-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded runner histories in testdata (%v)", err)
	}
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			replayer.RegisterWorkflowWithOptions(RunnerWorkflow, workflow.RegisterOptions{Name: RunnerWorkflowType})
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, file); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
