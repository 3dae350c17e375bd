package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// example is one payload from GitHub's published webhook examples (@octokit/webhooks-examples,
// pinned and fetched by scripts/tools.sh).
type example struct {
	event   string
	payload []byte
}

// key names an example by what the intake acts on, so the expectation table below must cover
// every documented shape and a new shape in a newer pin shows up as a failure.
func (e example) key() string {
	var p struct {
		Action      string `json:"action"`
		WorkflowJob struct {
			Status     string  `json:"status"`
			Conclusion *string `json:"conclusion"`
			RunnerName *string `json:"runner_name"`
		} `json:"workflow_job"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(e.payload, &p)
	if e.event == "ping" {
		return "ping"
	}
	wj := p.WorkflowJob
	return fmt.Sprintf("%s/%s/%s/%s/%s", p.Action, wj.Status, deref(wj.Conclusion), deref(wj.RunnerName), p.Repository.FullName)
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func loadExamples(t *testing.T, events ...string) []example {
	t.Helper()
	path, err := testworld.ToolPath("github-webhook-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var all []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []example
	for _, e := range all {
		for _, want := range events {
			if e.Name == want {
				for _, p := range e.Examples {
					out = append(out, example{event: e.Name, payload: p})
				}
			}
		}
	}
	return out
}

// variant derives a payload from a documented one: another action and workflow_job fields.
func variant(t *testing.T, base example, action string, change map[string]any) example {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(base.payload, &p); err != nil {
		t.Fatal(err)
	}
	p["action"] = action
	wj := p["workflow_job"].(map[string]any)
	for k, v := range change {
		wj[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return example{event: base.event, payload: b}
}

// outcome is what the intake must do with an example.
type outcome struct {
	status int
	// window is the pool whose scale window must have received the event ("" none).
	window string
	// runnerSignal is the signal the named runner workflow must have received ("" none).
	runnerSignal string
}

func TestDocumentedPayloads(t *testing.T) {
	examples := loadExamples(t, "workflow_job", "ping")
	if len(examples) < 8 {
		t.Fatalf("only %d workflow_job/ping examples in the pinned package", len(examples))
	}
	// Pools for the examples' repositories: the organization owning Codertocat/Hello-World
	// (the examples name its owner Octocoders; routing goes by repository.owner) with hosted-style
	// labels, a repository pool for the user-owned repository (user repositories can only use
	// repository pools), and a pool whose runner the derived variants name.
	codertocat, lineville, octo := unique("ex-codertocat-"), unique("ex-lineville-"), unique("ex-octo-")
	startPool(t, orgPool(codertocat, "Octocoders", "", "ubuntu-latest"))
	startPool(t, repoPool(lineville, "lineville/elastic-machines-testing", "k8s", "linux"))
	startPool(t, orgPool(octo, "octo-org", "", "gpu", "db-app", "dc-03"))
	runner := workflows.RunnerName(octo, "abcd", 1)
	startIdle(t, workflows.RunnerWorkflowID(octo, runner), workflows.RunnerWorkflowType, temporal.SearchAttributes{})
	h := newHandler(t, codertocat, lineville, octo)

	want := map[string]outcome{
		"ping": {status: http.StatusOK},
		// A runner runnerflow does not run took a job a pool reserved: that pool's window hears
		// it, so the pool ends the reservation instead of starting a runner for a served job.
		"in_progress/in_progress/null/my runner/octo-org/example-workflow":              {status: http.StatusAccepted, window: octo},
		"completed/completed/failure/GitHub Actions 5/Codertocat/Hello-World":           {status: http.StatusAccepted, window: codertocat},
		"completed/completed/success/GitHub Actions 5/Codertocat/Hello-World":           {status: http.StatusAccepted, window: codertocat},
		"in_progress/in_progress/null/GitHub Actions 5/Codertocat/Hello-World":          {status: http.StatusAccepted, window: codertocat},
		"in_progress/in_progress/null/GitHub Actions 6/wolfy1339/github-events-schemas": {status: http.StatusOK},
		"queued/queued/null/GitHub Actions 5/Codertocat/Hello-World":                    {status: http.StatusAccepted, window: codertocat},
		"queued/waiting/null/null/lineville/elastic-machines-testing":                   {status: http.StatusAccepted, window: lineville},
		"waiting/waiting/null/null/lineville/elastic-machines-testing":                  {status: http.StatusOK},
		"completed/completed/skipped/null/Codertocat/Hello-World":                       {status: http.StatusAccepted, window: codertocat},
		// A job that starts on a live runner of the pool it was routed to is that runner's news
		// alone: the runner tells its pool, the window does not hear it twice. Its end goes to
		// the window too (a runner ending at that moment never reads the notice).
		"in_progress/in_progress/null/" + runner + "/octo-org/example-workflow": {status: http.StatusAccepted, runnerSignal: workflows.SignalJobStarted},
		"completed/completed/success/" + runner + "/octo-org/example-workflow":  {status: http.StatusAccepted, window: octo, runnerSignal: workflows.SignalJobCompleted},
		"completed/completed/cancelled/null/lineville/elastic-machines-testing": {status: http.StatusAccepted, window: lineville},
		"queued/queued/null/null/wolfy1339/github-events-schemas":               {status: http.StatusOK}, // user repository, no pool of its own
	}

	examples = append(examples, derivedShapes(t, examples, runner)...)

	seen := map[string]bool{}
	for i, e := range examples {
		key := e.key()
		exp, ok := want[key]
		if !ok {
			t.Errorf("example %s has no expectation: a shape the intake was not checked against", key)
			continue
		}
		seen[key] = true
		id := fmt.Sprintf("example-%d", i)
		w := serve(h, delivery(e.event, id, e.payload))
		if w.Code != exp.status {
			t.Errorf("%s: got %d %s, want %d", key, w.Code, w.Body, exp.status)
		}
		checkWindow(t, key, exp.window, id)
		if exp.runnerSignal != "" {
			got := signals[workflows.JobSignal](t, workflows.RunnerWorkflowID(octo, runner), exp.runnerSignal)
			if len(got) == 0 || got[len(got)-1].RunnerName != runner || got[len(got)-1].JobID == 0 {
				t.Errorf("%s: runner workflow got %s signals %+v", key, exp.runnerSignal, got)
			}
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("expected shape %s was not among the examples", key)
		}
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// checkWindow asserts the delivery reached the named pool's scale window (or no window).
func checkWindow(t *testing.T, key, pool, deliveryID string) {
	t.Helper()
	if pool == "" {
		return
	}
	for _, ev := range windowEvents(t, pool) {
		if ev.DeliveryID == deliveryID {
			if ev.JobID == 0 || ev.Action == "" || ev.Repository == "" {
				t.Errorf("%s: window got an incomplete event %+v", key, ev)
			}
			return
		}
	}
	t.Errorf("%s: delivery %s never reached the scale window of %s", key, deliveryID, pool)
}

// derivedShapes derives from documented examples the shapes the package does not document
// directly: a skipped job (never got a runner), jobs run by a runnerflow runner, a job cancelled
// while waiting, and a queued job of a user repository without a pool.
func derivedShapes(t *testing.T, examples []example, runner string) []example {
	t.Helper()
	byKey := map[string]example{}
	for _, e := range examples {
		byKey[e.key()] = e
	}
	success := byKey["completed/completed/success/GitHub Actions 5/Codertocat/Hello-World"]
	started := byKey["in_progress/in_progress/null/my runner/octo-org/example-workflow"]
	waiting := byKey["waiting/waiting/null/null/lineville/elastic-machines-testing"]
	userStarted := byKey["in_progress/in_progress/null/GitHub Actions 6/wolfy1339/github-events-schemas"]
	for _, base := range []example{success, started, waiting, userStarted} {
		if base.payload == nil {
			t.Fatal("a documented example the variants derive from is missing from the pinned package")
		}
	}
	noRunner := map[string]any{"runner_name": nil, "runner_id": nil, "runner_group_name": nil, "runner_group_id": nil}
	return []example{
		variant(t, success, "completed", merge(noRunner, map[string]any{"conclusion": "skipped"})),
		variant(t, started, "in_progress", map[string]any{"runner_name": runner}),
		variant(t, started, "completed", map[string]any{"runner_name": runner, "status": "completed", "conclusion": "success"}),
		variant(t, waiting, "completed", map[string]any{"status": "completed", "conclusion": "cancelled"}),
		variant(t, userStarted, "queued", merge(noRunner, map[string]any{"status": "queued"})),
	}
}
