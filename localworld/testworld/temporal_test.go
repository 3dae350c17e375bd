package testworld

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// counterInput and counterAdd are the trivial workflow's input and signal; the workflow only
// proves that the real server runs workflows and that the real CLI reaches them.
type counterAdd struct {
	Amount int `json:"amount"`
}

type counterStatus struct {
	Total int `json:"total"`
}

func counterWorkflow(ctx workflow.Context) (counterStatus, error) {
	var status counterStatus
	if err := workflow.SetQueryHandler(ctx, "total", func() (counterStatus, error) { return status, nil }); err != nil {
		return status, err
	}
	adds := workflow.GetSignalChannel(ctx, "add")
	for status.Total < 10 {
		var add counterAdd
		adds.Receive(ctx, &add)
		status.Total += add.Amount
	}
	return status, nil
}

func TestTemporalServerRunsWorkflowDrivenByCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := StartTemporal(ctx, TemporalOptions{Dir: t.TempDir(), SearchAttributes: map[string]string{"RunnerPool": "Keyword"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	w := worker.New(c, "testworld", worker.Options{})
	w.RegisterWorkflowWithOptions(counterWorkflow, workflow.RegisterOptions{Name: "counter"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "counter-1", TaskQueue: "testworld"}, "counter")
	if err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) string {
		t.Helper()
		args = append(args, "--address", srv.Address, "--namespace", srv.Namespace)
		out, err := exec.CommandContext(ctx, srv.CLIPath, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("workflow", "signal", "--workflow-id", "counter-1", "--name", "add", "--input", `{"amount":4}`)
	out := cli("workflow", "query", "--workflow-id", "counter-1", "--name", "total", "--output", "json")
	if !strings.Contains(out, `"total": 4`) && !strings.Contains(out, `"total":4`) {
		t.Fatalf("query through the CLI after one signal: want total 4, got:\n%s", out)
	}
	cli("workflow", "signal", "--workflow-id", "counter-1", "--name", "add", "--input", `{"amount":6}`)

	var final counterStatus
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.Total != 10 {
		t.Fatalf("workflow result after CLI signals: want total 10, got %d", final.Total)
	}
	// The search attribute registered at start is known to the server.
	out = cli("operator", "search-attribute", "list", "--output", "json")
	var attrs any
	if err := json.Unmarshal([]byte(out), &attrs); err != nil || !strings.Contains(out, "RunnerPool") {
		t.Fatalf("registered search attribute RunnerPool missing (err %v):\n%s", err, out)
	}
}

// A world that cannot start (here: a checkout whose tools were never built) fails with an error
// that says what to run, and stops whatever it had started instead of crashing.
func TestStartWorldFailsCleanlyWithoutTools(t *testing.T) {
	checkout := t.TempDir()
	if err := os.WriteFile(filepath.Join(checkout, "go.mod"), []byte("module "+modulePath+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(checkout)
	w, err := StartWorld(context.Background(), WorldOptions{Dir: t.TempDir()})
	if err == nil {
		w.Stop()
		t.Fatal("StartWorld without tools: want an error")
	}
	if !strings.Contains(err.Error(), "scripts/tools.sh") {
		t.Fatalf("StartWorld without tools: error %q does not say how to build them", err)
	}
}
