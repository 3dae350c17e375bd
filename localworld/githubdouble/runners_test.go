package githubdouble

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

func TestGenerateJITConfigDuplicateNameIsConflict(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	if _, err := w.jit(ctx, c, "acme", "pool-a-1", "linux"); err != nil {
		t.Fatalf("first JIT config: %v", err)
	}
	_, err := w.jit(ctx, c, "acme", "pool-a-1", "linux")
	if got := statusOf(err); got != http.StatusConflict {
		t.Fatalf("second JIT config with the same name: status %d (%v), want 409", got, err)
	}
	// Names are per scope: the same name in another organization is fine.
	if _, err := w.jit(ctx, c, "solo", "pool-a-1", "linux"); err != nil {
		t.Fatalf("same name in another organization: %v", err)
	}
	if n := w.CallCount("POST /orgs/{org}/actions/runners/generate-jitconfig"); n != 3 {
		t.Fatalf("counted %d generate-jitconfig calls, want 3", n)
	}
	if n := w.Calls()[CallKey{Route: "POST /orgs/{org}/actions/runners/generate-jitconfig", Status: 409}]; n != 1 {
		t.Fatalf("counted %d 409 answers, want 1", n)
	}
}

func TestGenerateJITConfigUnknownScopeOrGroup(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	req := github.CreateJITConfigRequest{Name: "r", RunnerGroupID: 1, Labels: []string{"linux"}}
	if _, _, err := c.Actions.CreateOrgJITConfig(ctx, "nosuchorg", req); statusOf(err) != http.StatusNotFound {
		t.Fatalf("unknown organization: %v, want 404", err)
	}
	// A user is not an organization.
	if _, _, err := c.Actions.CreateOrgJITConfig(ctx, "alice", req); statusOf(err) != http.StatusNotFound {
		t.Fatalf("user as organization: %v, want 404", err)
	}
	req.RunnerGroupID = 999
	if _, _, err := c.Actions.CreateOrgJITConfig(ctx, "acme", req); statusOf(err) != http.StatusNotFound {
		t.Fatalf("unknown runner group: %v, want 404", err)
	}
	gid, err := w.AddRunnerGroup(OrgScope("acme"), "gpu")
	if err != nil {
		t.Fatalf("AddRunnerGroup: %v", err)
	}
	req.RunnerGroupID = gid
	cfg, _, err := c.Actions.CreateOrgJITConfig(ctx, "acme", req)
	if err != nil {
		t.Fatalf("JIT config in added group: %v", err)
	}
	if cfg.GetRunner().GetRunnerGroupID() != gid {
		t.Fatalf("runner group id %d, want %d", cfg.GetRunner().GetRunnerGroupID(), gid)
	}
	if _, err := w.AddRunnerGroup(RepoScope("acme/app"), "x"); err == nil {
		t.Fatal("AddRunnerGroup on a repository succeeded; repositories have no runner groups")
	}
}

func TestJITRunnerIsEphemeralOfflineAndReportsItsLabels(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	cfg, err := w.jit(context.Background(), c, "acme", "r1", "self-hosted", "linux", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.GetRunner()
	if !r.GetEphemeral() || r.GetStatus() != "offline" || r.GetBusy() {
		t.Fatalf("new JIT runner: ephemeral=%v status=%q busy=%v, want true offline false", r.GetEphemeral(), r.GetStatus(), r.GetBusy())
	}
	types := map[string]string{}
	for _, l := range r.Labels {
		types[l.GetName()] = l.GetType()
	}
	if types["self-hosted"] != "read-only" || types["gpu"] != "custom" || len(types) != 3 {
		t.Fatalf("labels %v, want self-hosted read-only, gpu custom, 3 labels", types)
	}
	if cfg.GetEncodedJITConfig() == "" || strings.Contains(cfg.GetEncodedJITConfig(), testToken) {
		t.Fatal("encoded JIT config is empty or leaks the API token")
	}
}

func TestDeleteRunnerWhileBusyIs422(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	cfg, err := w.jit(ctx, c, "acme", "busy-1", "linux")
	if err != nil {
		t.Fatal(err)
	}
	sess := connectJIT(t, w.Server, cfg)
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux"}}); err != nil {
		t.Fatal(err)
	}
	if j := acquireNow(t, w.Server, sess); j == nil {
		t.Fatal("runner got no job")
	}
	_, err = c.Actions.RemoveOrganizationRunner(ctx, "acme", sess.RunnerID)
	if statusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("delete busy runner: %v, want 422", err)
	}
	if want := fmt.Sprintf("Runner %q is still running a job", "busy-1"); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if len(w.Runners()) != 1 {
		t.Fatal("a busy runner was deleted")
	}
}

func TestDeleteIdleRunnerEndsItsSession(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	cfg, err := w.jit(ctx, c, "acme", "idle-1", "linux")
	if err != nil {
		t.Fatal(err)
	}
	sess := connectJIT(t, w.Server, cfg)
	if _, err := c.Actions.RemoveOrganizationRunner(ctx, "acme", sess.RunnerID); err != nil {
		t.Fatalf("delete idle runner: %v", err)
	}
	if _, err := c.Actions.RemoveOrganizationRunner(ctx, "acme", sess.RunnerID); statusOf(err) != http.StatusNotFound {
		t.Fatalf("delete again: %v, want 404", err)
	}
	if _, err := NewRunnerClient(w.URL()).AcquireJob(ctx, sess, 0); !isUnauthorized(err) {
		t.Fatalf("acquire after removal: %v, want ErrUnauthorized", err)
	}
	if _, err := NewRunnerClient(w.URL()).ConnectJIT(ctx, cfg.GetEncodedJITConfig()); !isUnauthorized(err) {
		t.Fatalf("reconnect with the JIT config of a removed runner: %v, want ErrUnauthorized", err)
	}
}

func TestRunnerOfAnotherScopeIsNotFound(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	cfg, err := w.jit(ctx, c, "acme", "org-runner", "linux")
	if err != nil {
		t.Fatal(err)
	}
	id := cfg.GetRunner().GetID()
	if _, _, err := c.Actions.GetRunner(ctx, "acme", "app", id); statusOf(err) != http.StatusNotFound {
		t.Fatalf("org runner through repository route: %v, want 404", err)
	}
	if _, _, err := c.Enterprise.GetRunner(ctx, "megacorp", id); statusOf(err) != http.StatusNotFound {
		t.Fatalf("org runner through enterprise route: %v, want 404", err)
	}
	got, _, err := c.Actions.GetOrganizationRunner(ctx, "ACME", id)
	if err != nil || got.GetName() != "org-runner" {
		t.Fatalf("org runner through its own route (case-folded): %v, %v", got, err)
	}
}

func TestListRunnersPaginatesWithLinkHeader(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := c.Actions.CreateRepoJITConfig(ctx, "acme", "app", github.CreateJITConfigRequest{
			Name: fmt.Sprintf("r%d", i), RunnerGroupID: 1, Labels: []string{"linux"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	opts := &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 2}}
	var names []string
	pages := 0
	for {
		rs, resp, err := c.Actions.ListRunners(ctx, "acme", "app", opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if rs.TotalCount != 5 {
			t.Fatalf("total_count %d, want 5", rs.TotalCount)
		}
		for _, r := range rs.Runners {
			names = append(names, r.GetName())
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if pages != 3 || strings.Join(names, ",") != "r0,r1,r2,r3,r4" {
		t.Fatalf("paged %d times through %v, want 3 pages of r0..r4", pages, names)
	}
	name := "r3"
	rs, _, err := c.Actions.ListRunners(ctx, "acme", "app", &github.ListRunnersOptions{Name: &name})
	if err != nil || rs.TotalCount != 1 || rs.Runners[0].GetName() != "r3" {
		t.Fatalf("name filter: %+v, %v", rs, err)
	}
	// Organization listings do not include repository runners.
	if rs, _, err := c.Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil || rs.TotalCount != 0 {
		t.Fatalf("org listing: %+v, %v; want no runners", rs, err)
	}
}

func TestRegistrationTokenExpiresAfterAnHour(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{Now: clock.Now})
	c := w.client(testToken, nil)
	ctx := context.Background()
	tok, _, err := c.Actions.CreateOrganizationRegistrationToken(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.GetExpiresAt().Sub(clock.Now()); got.Minutes() != 60 {
		t.Fatalf("token expires in %v, want 1h", got)
	}
	rc := NewRunnerClient(w.URL())
	if _, err := rc.RegisterWithToken(ctx, RegisterRequest{Token: tok.GetToken(), Name: "early"}); err != nil {
		t.Fatalf("register with a fresh token: %v", err)
	}
	clock.Advance(61 * time.Minute)
	if _, err := rc.RegisterWithToken(ctx, RegisterRequest{Token: tok.GetToken(), Name: "late"}); !isUnauthorized(err) {
		t.Fatalf("register with an expired token: %v, want ErrUnauthorized", err)
	}
}

func TestSecretsAreRandomAndRecorded(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	a, _, err := c.Actions.CreateRegistrationToken(ctx, "acme", "app")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := c.Actions.CreateRegistrationToken(ctx, "acme", "app")
	if err != nil {
		t.Fatal(err)
	}
	if a.GetToken() == b.GetToken() || len(a.GetToken()) < 30 {
		t.Fatalf("registration tokens %q and %q are not distinct, long random values", a.GetToken(), b.GetToken())
	}
	cfg, err := w.jit(ctx, c, "acme", "s1", "linux")
	if err != nil {
		t.Fatal(err)
	}
	secrets := strings.Join(w.IssuedSecrets(), "\n")
	for _, want := range []string{a.GetToken(), b.GetToken(), cfg.GetEncodedJITConfig(), testToken} {
		if !strings.Contains(secrets, want) {
			t.Fatalf("IssuedSecrets lacks %.12s...", want)
		}
	}
}

func TestLogsCarryNoSecrets(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	hr := newHookReceiver(t)
	w := startWorld(t, Config{Logger: logger, App: appConfig(), WebhookURL: hr.URL, WebhookSecret: "hook-secret"})
	ctx := context.Background()
	c := w.appClient(testAppKey, testInstallationID, nil)
	sess := newScopedJIT(t, w, c, OrgScope("acme"), "logged", []string{"linux"})
	job, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	acquireNow(t, w.Server, sess)
	if err := NewRunnerClient(w.URL()).CompleteJob(ctx, sess, job.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	_, _, _ = w.appClient(testAppKey, 1, nil).Actions.ListOrganizationRunners(ctx, "acme", nil) // unknown installation
	waitHooks(t, w.Server)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "job completed") {
		t.Fatalf("debug log lacks the job's completion: %s", logs.String())
	}
	for _, secret := range w.IssuedSecrets() {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("log contains a secret (%.8s...)", secret)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
