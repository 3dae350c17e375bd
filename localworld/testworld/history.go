package testworld

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RecordHistoryEnv names the build whose workflow histories the integration tests record into
// workflows/testdata for the replay test, e.g. RUNNERFLOW_RECORD_HISTORY=v2. Unset, nothing is
// recorded. Histories of every earlier build stay there, so a new build must replay them all.
const RecordHistoryEnv = "RUNNERFLOW_RECORD_HISTORY"

// RecordingHistories reports whether this run records histories (RecordHistoryEnv is set).
func RecordingHistories() bool { return os.Getenv(RecordHistoryEnv) != "" }

// RecordHistory exports one workflow run's history with the real temporal CLI, the way an
// operator would (`temporal workflow show --output json`), into
// workflows/testdata/<name>-<build>.json. An empty runID takes the latest run.
func (t *Temporal) RecordHistory(workflowID, runID, name string) (string, error) {
	build := os.Getenv(RecordHistoryEnv)
	if build == "" {
		return "", errors.New(RecordHistoryEnv + " is not set")
	}
	args := []string{"workflow", "show", "--workflow-id", workflowID, "--output", "json",
		"--address", t.Address, "--namespace", t.Namespace}
	if runID != "" {
		args = append(args, "--run-id", runID)
	}
	out, err := exec.Command(t.CLIPath, args...).Output()
	if err != nil {
		return "", fmt.Errorf("temporal workflow show %s: %w", workflowID, err)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "workflows", "testdata", name+"-"+build+".json")
	return path, os.WriteFile(path, out, 0o644)
}

// moduleRoot is the nearest folder above the working directory that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
