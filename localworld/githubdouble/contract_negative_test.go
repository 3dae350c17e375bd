package githubdouble

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v92/github"
)

// invalidJITBodies are generate-jitconfig bodies GitHub's description rejects.
var invalidJITBodies = map[string]string{
	"labels null":              `{"name":"r","runner_group_id":1,"labels":null}`,
	"labels empty":             `{"name":"r","runner_group_id":1,"labels":[]}`,
	"labels missing":           `{"name":"r","runner_group_id":1}`,
	"labels not an array":      `{"name":"r","runner_group_id":1,"labels":"linux"}`,
	"label not a string":       `{"name":"r","runner_group_id":1,"labels":[1]}`,
	"more than 100 labels":     fmt.Sprintf(`{"name":"r","runner_group_id":1,"labels":[%s"x"]}`, strings.Repeat(`"x",`, 100)),
	"runner_group_id missing":  `{"name":"r","labels":["linux"]}`,
	"runner_group_id null":     `{"name":"r","runner_group_id":null,"labels":["linux"]}`,
	"runner_group_id a string": `{"name":"r","runner_group_id":"1","labels":["linux"]}`,
	"runner_group_id fraction": `{"name":"r","runner_group_id":1.5,"labels":["linux"]}`,
	"name missing":             `{"runner_group_id":1,"labels":["linux"]}`,
	"name not a string":        `{"name":5,"runner_group_id":1,"labels":["linux"]}`,
	"work_folder not a string": `{"name":"r","runner_group_id":1,"labels":["linux"],"work_folder":5}`,
	"body not an object":       `["r",1,["linux"]]`,
}

var jitPaths = []string{
	"repos/acme/app/actions/runners/generate-jitconfig",
	"orgs/acme/actions/runners/generate-jitconfig",
	"enterprises/megacorp/actions/runners/generate-jitconfig",
}

// TestContractRejectsWhatGitHubRejects sends generate-jitconfig bodies the description rejects
// and requires the double to reject them too (422), with an answer that matches the
// description. A valid body is the control: accepted by both.
func TestContractRejectsWhatGitHubRejects(t *testing.T) {
	c := loadContract(t)
	rec := &recorder{base: http.DefaultTransport}
	w := startWorld(t, Config{})
	gh := w.client(testToken, rec)
	ctx := context.Background()
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/vnd.github.v3+json"}}
	for _, path := range jitPaths {
		for name, body := range invalidJITBodies {
			if err := c.validateRequest(http.MethodPost, w.URL()+path, header, []byte(body)); err == nil {
				t.Fatalf("%s: the description accepts %s; the case is wrong", name, body)
			}
			req, err := gh.NewRequest(ctx, http.MethodPost, path, json.RawMessage(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := gh.Do(req, nil)
			expectStatus(t, path+": "+name, resp, err, http.StatusUnprocessableEntity)
		}
		valid := `{"name":"control","runner_group_id":1,"labels":["self-hosted","linux"],"work_folder":"_work"}`
		if err := c.validateRequest(http.MethodPost, w.URL()+path, header, []byte(valid)); err != nil {
			t.Fatalf("the description rejects the control body: %v", err)
		}
		req, _ := gh.NewRequest(ctx, http.MethodPost, path, json.RawMessage(valid))
		resp, err := gh.Do(req, nil)
		expectStatus(t, path+": control", resp, err, http.StatusCreated)
	}
	// go-github sends a nil Labels slice as "labels": null; the double must refuse it as GitHub does.
	_, resp, err := gh.Actions.CreateOrgJITConfig(ctx, "acme", github.CreateJITConfigRequest{Name: "nil-labels", RunnerGroupID: 1})
	expectStatus(t, "go-github with nil labels", resp, err, http.StatusUnprocessableEntity)
	if len(w.Runners()) != len(jitPaths) {
		t.Fatalf("%d runners registered, want only the %d controls", len(w.Runners()), len(jitPaths))
	}
	// The double's 422 answers themselves must match the description (validation-error-simple).
	for _, ex := range rec.all() {
		in, err := c.requestInput(ex.method, ex.url, ex.reqHeader, ex.reqBody)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.validateResponse(in, ex.status, ex.respHeader, ex.respBody); err != nil {
			t.Errorf("%s answer %d does not match the description: %v", ex.url, ex.status, err)
		}
	}
}

// mutation changes a decoded JSON document in place.
type mutation struct {
	name   string
	mutate func(map[string]any)
}

func mutated(t *testing.T, body []byte, m func(map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	m(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func first(doc map[string]any, list string) map[string]any {
	return doc[list].([]any)[0].(map[string]any)
}

// TestContractValidatorIsSensitive proves the validation can fail: recorded answers of the
// double pass, and the same answers with one field broken do not.
func TestContractValidatorIsSensitive(t *testing.T) {
	c := loadContract(t)
	rec := &recorder{base: http.DefaultTransport}
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL})
	gh := w.client(testToken, rec)
	ctx := context.Background()
	cfg, err := w.jit(ctx, gh, "acme", "sensitive", "linux")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Actions.GetOrganizationRunner(ctx, "acme", cfg.GetRunner().GetID()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
		t.Fatal(err)
	}
	job, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if _, _, err := gh.Actions.ListWorkflowJobs(ctx, "acme", "app", job.RunID, nil); err != nil {
		t.Fatal(err)
	}
	checkRESTMutationsFail(t, c, rec.all())
	waitHooks(t, w.Server)
	checkWebhookMutationsFail(t, c, hr.all()[0].body)
}

// checkRESTMutationsFail requires the recorded answers (generate-jitconfig, get runner, list
// runners, list jobs) to pass and broken copies of them to fail.
func checkRESTMutationsFail(t *testing.T, c *contract, ex []exchange) {
	t.Helper()
	cases := map[int][]mutation{
		0: { // generate-jitconfig
			{"encoded_jit_config missing", func(d map[string]any) { delete(d, "encoded_jit_config") }},
			{"runner id a string", func(d map[string]any) { d["runner"].(map[string]any)["id"] = "5" }},
		},
		1: { // get runner
			{"id a string", func(d map[string]any) { d["id"] = "5" }},
			{"busy a string", func(d map[string]any) { d["busy"] = "true" }},
			{"status missing", func(d map[string]any) { delete(d, "status") }},
			{"labels a string", func(d map[string]any) { d["labels"] = "linux" }},
			{"label type outside its enum", func(d map[string]any) { first(d, "labels")["type"] = "magic" }},
		},
		2: { // list runners
			{"total_count a string", func(d map[string]any) { d["total_count"] = "1" }},
			{"runner id a fraction", func(d map[string]any) { first(d, "runners")["id"] = 1.5 }},
		},
		3: { // list jobs
			{"status outside its enum", func(d map[string]any) { first(d, "jobs")["status"] = "sleeping" }},
			{"runner_id a string", func(d map[string]any) { first(d, "jobs")["runner_id"] = "x" }},
			{"created_at missing", func(d map[string]any) { delete(first(d, "jobs"), "created_at") }},
		},
	}
	for i, ms := range cases {
		in, err := c.requestInput(ex[i].method, ex[i].url, ex[i].reqHeader, ex[i].reqBody)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.validateResponse(in, ex[i].status, ex[i].respHeader, ex[i].respBody); err != nil {
			t.Fatalf("unmutated answer of %s fails: %v", ex[i].url, err)
		}
		for _, m := range ms {
			body := mutated(t, ex[i].respBody, m.mutate)
			if err := c.validateResponse(in, ex[i].status, ex[i].respHeader, body); err == nil {
				t.Errorf("%s: answer with %s passed validation", ex[i].url, m.name)
			}
		}
	}
}

// checkWebhookMutationsFail requires a valid queued payload to pass and broken copies to fail.
func checkWebhookMutationsFail(t *testing.T, c *contract, queued []byte) {
	t.Helper()
	if err := c.validateWebhook("workflow-job-queued", queued); err != nil {
		t.Fatalf("unmutated queued payload fails: %v", err)
	}
	for _, m := range []mutation{
		{"workflow_job.id a string", func(d map[string]any) { d["workflow_job"].(map[string]any)["id"] = "1" }},
		{"workflow_job.status outside its enum", func(d map[string]any) { d["workflow_job"].(map[string]any)["status"] = "bogus" }},
		{"sender missing", func(d map[string]any) { delete(d, "sender") }},
		{"repository.full_name missing", func(d map[string]any) { delete(d["repository"].(map[string]any), "full_name") }},
	} {
		if err := c.validateWebhook("workflow-job-queued", mutated(t, queued, m.mutate)); err == nil {
			t.Errorf("queued payload with %s passed validation", m.name)
		}
	}
}
