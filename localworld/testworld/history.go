package testworld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/runnerflow/runnerflow/workflows"
)

// RecordHistoryEnv names the build whose workflow histories the integration tests record into
// workflows/testdata for the replay test, e.g. RUNNERFLOW_RECORD_HISTORY=v2. Unset, nothing is
// recorded. Histories of every earlier build stay there, so a new build must replay them all.
const RecordHistoryEnv = "RUNNERFLOW_RECORD_HISTORY"

// RecordingHistories reports whether this run records histories (RecordHistoryEnv is set).
func RecordingHistories() bool { return os.Getenv(RecordHistoryEnv) != "" }

// RecordHistory exports one workflow run's history with the real temporal CLI, the way an
// operator would (`temporal workflow show --output json`), into
// workflows/testdata/<name>-<build>.json. An empty runID takes the latest run. A history
// recorded while the waits at rest are not production's gets them beside it, in
// <name>-<build>.rest-waits, for the replay test to replay it under (workflows.RestWaits).
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
	base := filepath.Join(root, "workflows", "testdata", name+"-"+build)
	if err := recordRestWaits(base + ".rest-waits"); err != nil {
		return "", err
	}
	return base + ".json", os.WriteFile(base+".json", out, 0o644)
}

// recordRestWaits writes the waits at rest in force to path when they are not production's,
// and removes a path left by an earlier recording otherwise.
func recordRestWaits(path string) error {
	waits := workflows.CurrentRestWaits()
	if waits == workflows.ProductionRestWaits {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(waits, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
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

// HistoryBytes is one workflow run's whole history as the server keeps it, every event
// marshalled: payloads are stored as JSON text inside, so a search of these bytes finds any
// value that ever entered the history.
func HistoryBytes(ctx context.Context, c client.Client, workflowID, runID string) ([]byte, error) {
	var buf bytes.Buffer
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		b, err := proto.Marshal(ev)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// FindSecrets returns the secrets that occur in raw (empty ones never match).
func FindSecrets(raw []byte, secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if s != "" && bytes.Contains(raw, []byte(s)) {
			out = append(out, s)
		}
	}
	return out
}
