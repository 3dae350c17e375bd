package githubdouble

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

// scopeAPI drives the runner endpoints of one scope with go-github.
type scopeAPI struct {
	scope       Scope
	regToken    func(context.Context) (*github.RegistrationToken, *github.Response, error)
	removeToken func(context.Context) (*github.Response, error)
	jit         func(context.Context, github.CreateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error)
	list        func(context.Context, *github.ListRunnersOptions) (*github.Runners, *github.Response, error)
	get         func(context.Context, int64) (*github.Runner, *github.Response, error)
	remove      func(context.Context, int64) (*github.Response, error)
	jobRepo     string
}

func scopeAPIs(c *github.Client) []scopeAPI {
	return []scopeAPI{repoAPI(c), orgAPI(c), enterpriseAPI(c)}
}

func repoAPI(c *github.Client) scopeAPI {
	return scopeAPI{
		scope: RepoScope("acme/app"),
		regToken: func(ctx context.Context) (*github.RegistrationToken, *github.Response, error) {
			return c.Actions.CreateRegistrationToken(ctx, "acme", "app")
		},
		removeToken: func(ctx context.Context) (*github.Response, error) {
			_, r, err := c.Actions.CreateRemoveToken(ctx, "acme", "app")
			return r, err
		},
		jit: func(ctx context.Context, req github.CreateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error) {
			return c.Actions.CreateRepoJITConfig(ctx, "acme", "app", req)
		},
		list: func(ctx context.Context, o *github.ListRunnersOptions) (*github.Runners, *github.Response, error) {
			return c.Actions.ListRunners(ctx, "acme", "app", o)
		},
		get: func(ctx context.Context, id int64) (*github.Runner, *github.Response, error) {
			return c.Actions.GetRunner(ctx, "acme", "app", id)
		},
		remove: func(ctx context.Context, id int64) (*github.Response, error) {
			return c.Actions.RemoveRunner(ctx, "acme", "app", id)
		},
		jobRepo: "acme/app",
	}
}

func orgAPI(c *github.Client) scopeAPI {
	return scopeAPI{
		scope: OrgScope("acme"),
		regToken: func(ctx context.Context) (*github.RegistrationToken, *github.Response, error) {
			return c.Actions.CreateOrganizationRegistrationToken(ctx, "acme")
		},
		removeToken: func(ctx context.Context) (*github.Response, error) {
			_, r, err := c.Actions.CreateOrganizationRemoveToken(ctx, "acme")
			return r, err
		},
		jit: func(ctx context.Context, req github.CreateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error) {
			return c.Actions.CreateOrgJITConfig(ctx, "acme", req)
		},
		list: func(ctx context.Context, o *github.ListRunnersOptions) (*github.Runners, *github.Response, error) {
			return c.Actions.ListOrganizationRunners(ctx, "acme", o)
		},
		get: func(ctx context.Context, id int64) (*github.Runner, *github.Response, error) {
			return c.Actions.GetOrganizationRunner(ctx, "acme", id)
		},
		remove: func(ctx context.Context, id int64) (*github.Response, error) {
			return c.Actions.RemoveOrganizationRunner(ctx, "acme", id)
		},
		jobRepo: "acme/lib",
	}
}

func enterpriseAPI(c *github.Client) scopeAPI {
	return scopeAPI{
		scope: EnterpriseScope("megacorp"),
		regToken: func(ctx context.Context) (*github.RegistrationToken, *github.Response, error) {
			return c.Enterprise.CreateRegistrationToken(ctx, "megacorp")
		},
		removeToken: func(ctx context.Context) (*github.Response, error) {
			// go-github has no call for the enterprise remove token; its request builder does.
			req, err := c.NewRequest(ctx, http.MethodPost, "enterprises/megacorp/actions/runners/remove-token", nil)
			if err != nil {
				return nil, err
			}
			return c.Do(req, &github.RemoveToken{})
		},
		jit: func(ctx context.Context, req github.CreateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error) {
			return c.Enterprise.CreateJITConfig(ctx, "megacorp", req)
		},
		list: func(ctx context.Context, o *github.ListRunnersOptions) (*github.Runners, *github.Response, error) {
			return c.Enterprise.ListRunners(ctx, "megacorp", o)
		},
		get: func(ctx context.Context, id int64) (*github.Runner, *github.Response, error) {
			return c.Enterprise.GetRunner(ctx, "megacorp", id)
		},
		remove: func(ctx context.Context, id int64) (*github.Response, error) {
			return c.Enterprise.RemoveRunner(ctx, "megacorp", id)
		},
		jobRepo: "acme/app",
	}
}

// expectStatus fails the test unless a go-github call answered want.
func expectStatus(t *testing.T, what string, resp *github.Response, err error, want int) {
	t.Helper()
	got := 0
	if resp != nil {
		got = resp.StatusCode
	}
	if got != want {
		t.Fatalf("%s: status %d (%v), want %d", what, got, err, want)
	}
}

// driveScope exercises every runner endpoint of one scope, success and error paths.
func driveScope(t *testing.T, w *world, api scopeAPI) {
	ctx := context.Background()
	_, resp, err := api.regToken(ctx)
	expectStatus(t, "registration token", resp, err, http.StatusCreated)
	resp, err = api.removeToken(ctx)
	expectStatus(t, "remove token", resp, err, http.StatusCreated)

	req := github.CreateJITConfigRequest{Name: "contract-1", RunnerGroupID: 1, Labels: []string{"self-hosted", "linux"}}
	cfg, resp, err := api.jit(ctx, req)
	expectStatus(t, "generate-jitconfig", resp, err, http.StatusCreated)
	_, resp, err = api.jit(ctx, req)
	expectStatus(t, "generate-jitconfig, duplicate name", resp, err, http.StatusConflict)
	_, resp, err = api.jit(ctx, github.CreateJITConfigRequest{Name: "contract-x", RunnerGroupID: 999, Labels: []string{"linux"}})
	expectStatus(t, "generate-jitconfig, unknown group", resp, err, http.StatusNotFound)
	folder := "_work/custom"
	idle, resp, err := api.jit(ctx, github.CreateJITConfigRequest{Name: "contract-2", RunnerGroupID: 1, Labels: []string{"linux"}, WorkFolder: &folder})
	expectStatus(t, "generate-jitconfig with work_folder", resp, err, http.StatusCreated)

	list, resp, err := api.list(ctx, &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 1}})
	expectStatus(t, "list runners", resp, err, http.StatusOK)
	if resp.NextPage != 2 || list.TotalCount != 2 {
		t.Fatalf("%s: list page 1 of 2: next %d total %d", api.scope, resp.NextPage, list.TotalCount)
	}
	_, resp, err = api.list(ctx, &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 1, Page: 2}})
	expectStatus(t, "list runners page 2", resp, err, http.StatusOK)
	name := "contract-2"
	_, resp, err = api.list(ctx, &github.ListRunnersOptions{Name: &name})
	expectStatus(t, "list runners by name", resp, err, http.StatusOK)

	_, resp, err = api.get(ctx, 987654)
	expectStatus(t, "get unknown runner", resp, err, http.StatusNotFound)
	driveBusyRunner(t, w, api, cfg)
	resp, err = api.remove(ctx, idle.GetRunner().GetID())
	expectStatus(t, "delete idle runner", resp, err, http.StatusNoContent)
}

// driveBusyRunner takes a runner through a job: get while busy, refused delete (422), removal
// after the job, 404 afterwards.
func driveBusyRunner(t *testing.T, w *world, api scopeAPI, cfg *github.JITRunnerConfig) {
	ctx := context.Background()
	id := cfg.GetRunner().GetID()
	_, resp, err := api.get(ctx, id)
	expectStatus(t, "get runner", resp, err, http.StatusOK)
	sess := connectJIT(t, w.Server, cfg)
	job, err := w.QueueJob(JobSpec{Repository: api.jobRepo, Labels: []string{"self-hosted", "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := acquireNow(t, w.Server, sess); got == nil || got.ID != job.ID {
		t.Fatalf("%s: runner did not get job %d: %+v", api.scope, job.ID, got)
	}
	busy, resp, err := api.get(ctx, id)
	expectStatus(t, "get busy runner", resp, err, http.StatusOK)
	if !busy.GetBusy() || busy.GetStatus() != "online" {
		t.Fatalf("%s: busy runner reported busy=%v status=%q", api.scope, busy.GetBusy(), busy.GetStatus())
	}
	resp, err = api.remove(ctx, id)
	expectStatus(t, "delete busy runner", resp, err, http.StatusUnprocessableEntity)
	if err := NewRunnerClient(w.URL()).CompleteJob(ctx, sess, job.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	_, resp, err = api.get(ctx, id)
	expectStatus(t, "get ephemeral runner after its job", resp, err, http.StatusNotFound)
	resp, err = api.remove(ctx, id)
	expectStatus(t, "delete removed runner", resp, err, http.StatusNotFound)
}

// driveRepository exercises the runs and jobs listings.
func driveRepository(t *testing.T, w *world, c *github.Client) {
	ctx := context.Background()
	cancelled, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CancelJob(cancelled.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"arm64"}}); err != nil {
		t.Fatal(err)
	}
	_, resp, err := c.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "app", &github.ListWorkflowRunsOptions{ListOptions: github.ListOptions{PerPage: 2}})
	expectStatus(t, "list runs", resp, err, http.StatusOK)
	_, resp, err = c.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "app", &github.ListWorkflowRunsOptions{Status: "completed"})
	expectStatus(t, "list completed runs", resp, err, http.StatusOK)
	_, resp, err = c.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "nosuchrepo", nil)
	expectStatus(t, "list runs of unknown repository", resp, err, http.StatusNotFound)
	for _, j := range w.Jobs() {
		if j.Repository != "acme/app" {
			continue
		}
		_, resp, err = c.Actions.ListWorkflowJobs(ctx, "acme", "app", j.RunID, &github.ListWorkflowJobsOptions{Filter: "latest"})
		expectStatus(t, "list jobs", resp, err, http.StatusOK)
		_, resp, err = c.Actions.GetWorkflowJobByID(ctx, "acme", "app", j.ID)
		expectStatus(t, "get job", resp, err, http.StatusOK)
		_, resp, err = c.Actions.GetWorkflowRunByID(ctx, "acme", "app", j.RunID)
		expectStatus(t, "get run", resp, err, http.StatusOK)
	}
	_, resp, err = c.Actions.GetWorkflowJobByID(ctx, "acme", "app", 999999)
	expectStatus(t, "get unknown job", resp, err, http.StatusNotFound)
	_, resp, err = c.Actions.GetWorkflowRunByID(ctx, "acme", "app", 999999)
	expectStatus(t, "get unknown run", resp, err, http.StatusNotFound)
	_, resp, err = c.Actions.ListWorkflowJobs(ctx, "acme", "app", 999999, nil)
	expectStatus(t, "list jobs of unknown run", resp, err, http.StatusNotFound)
	driveContents(t, w, c)
	// A user-owned repository has runners too.
	_, resp, err = c.Actions.CreateRepoJITConfig(ctx, "alice", "dotfiles", github.CreateJITConfigRequest{Name: "u", RunnerGroupID: 1, Labels: []string{"linux"}})
	expectStatus(t, "JIT config for a user repository", resp, err, http.StatusCreated)
}

// driveContents reads a workflow file through the contents API: at a branch, at a commit, a
// conditional read, and the 404s of a missing path and an unknown ref.
func driveContents(t *testing.T, w *world, c *github.Client) {
	ctx := context.Background()
	sha, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: map[string]string{pipelinePath: pipelineFile}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, resp, err := c.Repositories.GetContents(ctx, "acme", "app", pipelinePath, nil)
	expectStatus(t, "get a file at the default branch", resp, err, http.StatusOK)
	_, _, resp, err = c.Repositories.GetContents(ctx, "acme", "app", pipelinePath, &github.RepositoryContentGetOptions{Ref: sha})
	expectStatus(t, "get a file at a commit", resp, err, http.StatusOK)
	req, err := c.NewRequest(ctx, http.MethodGet, "repos/acme/app/contents/"+pipelinePath+"?ref="+sha, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp, err = c.Do(req, nil)
	expectStatus(t, "get an unchanged file again", resp, err, http.StatusNotModified)
	_, _, resp, err = c.Repositories.GetContents(ctx, "acme", "app", ".github/workflows/none.yml", nil)
	expectStatus(t, "get a missing file", resp, err, http.StatusNotFound)
	_, _, resp, err = c.Repositories.GetContents(ctx, "acme", "app", pipelinePath, &github.RepositoryContentGetOptions{Ref: "nosuchbranch"})
	expectStatus(t, "get a file at an unknown ref", resp, err, http.StatusNotFound)
}

// driveAuth exercises App authentication and the refusals: bad token, installation token on
// enterprise endpoints, unknown installation, rate limits.
func driveAuth(t *testing.T, w *world, rec *recorder) {
	ctx := context.Background()
	app := w.appClient(testAppKey, testInstallationID, rec)
	_, resp, err := app.Actions.ListOrganizationRunners(ctx, "acme", nil)
	expectStatus(t, "list runners as App installation", resp, err, http.StatusOK)
	_, resp, err = app.Enterprise.ListRunners(ctx, "megacorp", nil)
	expectStatus(t, "enterprise runners as App installation", resp, err, http.StatusForbidden)
	if _, _, err := w.appClient(testAppKey, 31337, rec).Actions.ListOrganizationRunners(ctx, "acme", nil); err == nil {
		t.Fatal("token for an unknown installation was issued")
	}
	_, resp, err = w.client("ghp_unknown", rec).Actions.ListOrganizationRunners(ctx, "acme", nil)
	expectStatus(t, "unknown token", resp, err, http.StatusUnauthorized)

	w.SetSecondaryRateLimit(30 * time.Second)
	_, resp, err = w.client(testToken, rec).Actions.ListOrganizationRunners(ctx, "acme", nil)
	expectStatus(t, "secondary rate limit", resp, err, http.StatusForbidden)
	w.SetSecondaryRateLimit(0)

	// Over the points a minute: a read and a write refused by the secondary limit.
	points := startWorld(t, Config{SecondaryPointsPerMinute: 5})
	pc := points.client(testToken, rec)
	_, resp, err = pc.Actions.CreateOrgJITConfig(ctx, "acme", github.CreateJITConfigRequest{Name: "points", RunnerGroupID: 1, Labels: []string{"linux"}})
	expectStatus(t, "write within the points", resp, err, http.StatusCreated)
	_, resp, err = points.client(testToken, rec).Actions.ListOrganizationRunners(ctx, "acme", nil)
	expectStatus(t, "read over the points", resp, err, http.StatusForbidden)
	_, resp, err = points.client(testToken, rec).Actions.CreateOrgJITConfig(ctx, "acme", github.CreateJITConfigRequest{Name: "over", RunnerGroupID: 1, Labels: []string{"linux"}})
	expectStatus(t, "write over the points", resp, err, http.StatusForbidden)

	limited := startWorld(t, Config{Tokens: []string{"ghp_small"}, RateLimit: 1})
	c := limited.client("ghp_small", rec)
	_, resp, err = c.Actions.ListOrganizationRunners(ctx, "acme", nil)
	expectStatus(t, "last call of the budget", resp, err, http.StatusOK)
	_, resp, err = limited.client("ghp_small", rec).Actions.ListOrganizationRunners(ctx, "acme", nil)
	expectStatus(t, "call over budget", resp, err, http.StatusForbidden)
}

// TestContractRESTAgainstOpenAPI drives every endpoint of the double with the real go-github
// client (and ghinstallation for App auth) and validates every request and answer against
// GitHub's OpenAPI description.
func TestContractRESTAgainstOpenAPI(t *testing.T) {
	c := loadContract(t)
	rec := &recorder{base: http.DefaultTransport}
	w := startWorld(t, Config{App: appConfig()})
	gh := w.client(testToken, rec)
	for _, api := range scopeAPIs(gh) {
		driveScope(t, w, api)
	}
	driveRepository(t, w, gh)
	driveConditional(t, w, gh)
	driveAuth(t, w, rec)
	driveHookDeliveries(t, w, rec)

	covered := map[string]bool{}
	statuses := map[int]bool{}
	for _, ex := range rec.all() {
		op, err := c.validate(ex)
		if err != nil {
			t.Errorf("%s %s: %v\nanswer: %.400s", ex.method, ex.url, err, ex.respBody)
			continue
		}
		statuses[ex.status] = true
		if ex.status < 300 {
			covered[strings.ToLower(op)] = true
		}
	}
	for _, op := range servedOperations() {
		if key := op.method + " " + strings.ToLower(op.path); !covered[key] {
			t.Errorf("operation %s %s was never exercised successfully", strings.ToUpper(op.method), op.path)
		}
	}
	for _, want := range []int{200, 201, 204, 304, 401, 403, 404, 409, 422} {
		if !statuses[want] {
			t.Errorf("no validated answer with status %d", want)
		}
	}
}

// TestContractWebhookPayloads validates the double's workflow_job and ping payloads against
// the payload schemas of the description's x-webhooks entries.
func TestContractWebhookPayloads(t *testing.T) {
	c := loadContract(t)
	hr := newHookReceiver(t)
	w := startWorld(t, Config{App: appConfig(), WebhookURL: hr.URL, WebhookSecret: "contract"})
	gh := w.client(testToken, nil)
	for i, api := range scopeAPIs(gh) {
		cfg, _, err := api.jit(context.Background(), github.CreateJITConfigRequest{Name: "hook", RunnerGroupID: 1, Labels: []string{"linux"}})
		if err != nil {
			t.Fatal(err)
		}
		sess := connectJIT(t, w.Server, cfg)
		job, _ := w.QueueJob(JobSpec{Repository: api.jobRepo, Labels: []string{"self-hosted", "linux"}})
		acquireNow(t, w.Server, sess)
		conclusion := []string{ConclusionSuccess, ConclusionFailure, ConclusionCancelled}[i]
		if err := NewRunnerClient(w.URL()).CompleteJob(context.Background(), sess, job.ID, conclusion); err != nil {
			t.Fatal(err)
		}
	}
	never, _ := w.QueueJob(JobSpec{Repository: "alice/dotfiles", Labels: []string{"gpu"}})
	if err := w.CancelJob(never.ID); err != nil { // completed without a runner: null runner fields
		t.Fatal(err)
	}
	// A run of a file whose first jobs are cancelled: their dependants complete as skipped.
	if _, err := w.PushFiles(PushSpec{Repository: "solo/tool", Files: map[string]string{pipelinePath: pipelineFile}}); err != nil {
		t.Fatal(err)
	}
	run, err := w.StartRun(RunSpec{Repository: "solo/tool", Path: pipelinePath})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lint", "test"} {
		if err := w.CancelJob(run.ByJob[id][0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if run, _ = w.Run(run.ID); run.ByJob["build"][0].Conclusion != ConclusionSkipped {
		t.Fatalf("build after a cancelled need: %+v", run.ByJob["build"])
	}
	if _, err := w.SendPing(); err != nil {
		t.Fatal(err)
	}
	if _, err := gh.Organizations.PingHook(context.Background(), "acme", hookID); err != nil {
		t.Fatal(err)
	}
	if _, err := gh.Repositories.PingHook(context.Background(), "solo", "tool", hookID); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)

	validated := map[string]int{}
	for _, h := range hr.all() {
		name := "ping"
		if event := h.header.Get("X-GitHub-Event"); event == "workflow_job" {
			var ev github.WorkflowJobEvent
			if err := json.Unmarshal(h.body, &ev); err != nil {
				t.Fatal(err)
			}
			name = "workflow-job-" + strings.ReplaceAll(ev.GetAction(), "_", "-")
		}
		if err := c.validateWebhook(name, h.body); err != nil {
			t.Errorf("%s payload does not match GitHub's schema: %v\npayload: %.600s", name, err, h.body)
		}
		validated[name]++
	}
	for _, name := range servedWebhooks {
		if validated[name] == 0 {
			t.Errorf("no %s payload was validated", name)
		}
	}
	if got := slices.Sorted(maps.Keys(validated)); len(got) != len(servedWebhooks) {
		t.Errorf("validated payload kinds %v, want exactly %v", got, servedWebhooks)
	}
}
