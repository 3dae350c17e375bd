package poolcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// The commands run against a real Temporal server with a worker that runs the real pool
// workflow. The pools here have no minimum, so they start no runners and need no cluster.
var server *testworld.Temporal

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runnerflow-poolcli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	server, err = testworld.StartTemporal(ctx, testworld.TemporalOptions{Dir: dir, SearchAttributes: workflows.SearchAttributeTypes()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start temporal:", err)
		return 1
	}
	defer server.Stop()
	c, err := server.Dial()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	w := worker.New(c, workflows.DecisionTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.PoolWorkflow, workflow.RegisterOptions{Name: workflows.PoolWorkflowType})
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer w.Stop()
	return m.Run()
}

func init() {
	// Each test bumps runs first, so every test (and every -count rerun) has its own pools.
	runs = int(time.Now().UnixNano() % 1000)
}

// runs makes pool names unique per test run (the server outlives runs with -count).
var runs int

func uniq(name string) string { return fmt.Sprintf("%s-%d", name, runs) }

func pool(name, image string, maxReplicas int) string {
	return fmt.Sprintf(`
name: %s
organization: acme
labels: [linux, X64]
minReplicas: 0
maxReplicas: %d
template:
  spec:
    containers:
    - name: runner
      image: %s
`, name, maxReplicas, image)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func flags(extra ...string) []string {
	return append([]string{"--temporal-address", server.Address, "--namespace", server.Namespace}, extra...)
}

func TestApplyRejectsAnInvalidFileAndStartsNothing(t *testing.T) {
	runs++
	ctx := context.Background()
	file := writeFile(t, pool(uniq("bad-a"), "runner:1", 3)+"---\n"+strings.Replace(pool(uniq("bad-b"), "runner:1", 3), "maxReplicas: 3", "maxReplicas: -1", 1))
	var out bytes.Buffer
	err := RunApply(ctx, flags("-f", file), &out)
	if err == nil || !strings.Contains(err.Error(), "pools[1].maxReplicas") {
		t.Fatalf("apply error = %v, want one naming pools[1].maxReplicas", err)
	}
	c := dial(t)
	for _, name := range []string{uniq("bad-a"), uniq("bad-b")} {
		if _, err := c.DescribeWorkflowExecution(ctx, workflows.PoolWorkflowID(name), ""); err == nil {
			t.Errorf("pool %s was started from an invalid file", name)
		}
	}
}

func TestApplyIsIdempotentAndReportsChanges(t *testing.T) {
	runs++
	ctx := context.Background()
	apply := func(content string) string {
		t.Helper()
		var out bytes.Buffer
		if err := RunApply(ctx, flags("-f", writeFile(t, content)), &out); err != nil {
			t.Fatalf("apply: %v\n%s", err, out.String())
		}
		return out.String()
	}
	first := apply(pool(uniq("idem-a"), "runner:1", 3) + "---\n" + pool(uniq("idem-b"), "runner:1", 3))
	if strings.Count(first, " created ") != 2 {
		t.Errorf("first apply:\n%s\nwant both pools created", first)
	}
	if again := apply(pool(uniq("idem-a"), "runner:1", 3) + "---\n" + pool(uniq("idem-b"), "runner:1", 3)); strings.Count(again, " unchanged ") != 2 {
		t.Errorf("second apply:\n%s\nwant both unchanged", again)
	}
	changed := apply(pool(uniq("idem-a"), "runner:1", 4) + "---\n" + pool(uniq("idem-b"), "runner:2", 3))
	if a := lineOf(changed, uniq("idem-a")); !strings.Contains(a, "configured") || strings.Contains(a, "rolling out") {
		t.Errorf("third apply:\n%s\nwant idem-a configured without rollout", changed)
	}
	if !strings.Contains(lineOf(changed, uniq("idem-b")), "configured") || !strings.Contains(lineOf(changed, uniq("idem-b")), "rolling out") {
		t.Errorf("third apply:\n%s\nwant idem-b configured and rolling out", changed)
	}
	st, err := Status(ctx, dial(t), uniq("idem-a"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Bounds.Max != 4 || st.Spec.Labels[1] != "X64" {
		t.Errorf("status after apply: bounds %+v labels %v", st.Bounds, st.Spec.Labels)
	}
	desc, err := dial(t).DescribeWorkflowExecution(ctx, workflows.PoolWorkflowID(uniq("idem-a")), "")
	if err != nil {
		t.Fatal(err)
	}
	attrs := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]string{"RunnerPool": `"` + uniq("idem-a") + `"`, "RunnerPoolScope": `"org:acme"`, "RunnerPoolLabels": `["linux","x64"]`} {
		if got := string(attrs[name].GetData()); got != want {
			t.Errorf("search attribute %s = %s, want %s", name, got, want)
		}
	}
}

func TestGetShowsOnePoolAndTheTable(t *testing.T) {
	runs++
	ctx := context.Background()
	var out bytes.Buffer
	if err := RunApply(ctx, flags("-f", writeFile(t, pool(uniq("get-a"), "runner:1", 2)+"---\n"+pool(uniq("get-b"), "runner:1", 5))), &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := RunGet(ctx, append([]string{uniq("get-a")}, flags()...), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Pool " + uniq("get-a"), "org:acme", "min 0, max 2", "mode active"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("get get-a output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := RunGet(ctx, append([]string{uniq("get-b"), "-o", "json"}, flags()...), &out); err != nil {
		t.Fatal(err)
	}
	var st workflows.PoolStatus
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Name != uniq("get-b") || st.Bounds.Max != 5 {
		t.Errorf("get -o json: %v %+v", err, st)
	}
	waitListed(t, uniq("get-a"), uniq("get-b"))
	out.Reset()
	if err := RunGet(ctx, flags(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POOL", uniq("get-a"), uniq("get-b")} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("get table lacks %q:\n%s", want, out.String())
		}
	}
	if err := RunGet(ctx, append([]string{"no-such-pool"}, flags()...), &out); err == nil {
		t.Error("get of an unknown pool succeeded")
	}
}

func TestApplyUsage(t *testing.T) {
	runs++
	var out bytes.Buffer
	if err := RunApply(context.Background(), flags(), &out); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("apply without -f: %v", err)
	}
	if err := RunApply(context.Background(), flags("-f", filepath.Join(t.TempDir(), "missing.yaml")), &out); err == nil {
		t.Error("apply of a missing file succeeded")
	}
	out.Reset()
	if err := RunApply(context.Background(), flags("-f", writeFile(t, pool(uniq("dry"), "runner:1", 1)), "--dry-run"), &out); err != nil || !strings.Contains(out.String(), "pool/"+uniq("dry")+" valid") {
		t.Errorf("dry run: %v %q", err, out.String())
	}
}

// waitListed waits until the server's visibility store lists the pools (it is updated
// asynchronously after a start).
func waitListed(t *testing.T, pools ...string) {
	t.Helper()
	c := dial(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		names, err := Pools(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, p := range pools {
			if !slices.Contains(names, p) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pools %v not listed; listed %v", pools, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lineOf(out, pool string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "pool/"+pool+" ") {
			return l
		}
	}
	return ""
}

func dial(t *testing.T) client.Client {
	t.Helper()
	c, err := server.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
