package githubdouble

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

// newScopedJIT creates a JIT runner in any scope with go-github and connects it.
func newScopedJIT(t *testing.T, w *world, c *github.Client, scope Scope, name string, labels []string) RunnerSession {
	t.Helper()
	ctx := context.Background()
	req := github.CreateJITConfigRequest{Name: name, RunnerGroupID: 1, Labels: labels}
	var cfg *github.JITRunnerConfig
	var err error
	switch scope.Kind {
	case ScopeRepository:
		owner, repo, _ := strings.Cut(scope.Name, "/")
		cfg, _, err = c.Actions.CreateRepoJITConfig(ctx, owner, repo, req)
	case ScopeOrganization:
		cfg, _, err = c.Actions.CreateOrgJITConfig(ctx, scope.Name, req)
	case ScopeEnterprise:
		cfg, _, err = c.Enterprise.CreateJITConfig(ctx, scope.Name, req)
	}
	if err != nil {
		t.Fatalf("JIT config in %s: %v", scope, err)
	}
	return connectJIT(t, w.Server, cfg)
}

func TestAssignmentRespectsScopeAndLabels(t *testing.T) {
	cases := []struct {
		name         string
		scope        Scope
		runnerLabels []string
		repo         string
		jobLabels    []string
		assigned     bool
	}{
		{"repository runner, its repository", RepoScope("acme/app"), []string{"linux"}, "acme/app", []string{"self-hosted", "linux"}, true},
		{"repository runner, other repository", RepoScope("acme/lib"), []string{"linux"}, "acme/app", []string{"self-hosted", "linux"}, false},
		{"organization runner, its repository", OrgScope("acme"), []string{"linux"}, "acme/app", []string{"self-hosted", "linux"}, true},
		{"organization runner, other organization", OrgScope("solo"), []string{"linux"}, "acme/app", []string{"self-hosted", "linux"}, false},
		{"organization runner, user repository", OrgScope("acme"), []string{"linux"}, "alice/dotfiles", []string{"linux"}, false},
		{"enterprise runner, member organization", EnterpriseScope("megacorp"), []string{"linux"}, "acme/app", []string{"linux"}, true},
		{"enterprise runner, organization outside", EnterpriseScope("megacorp"), []string{"linux"}, "solo/tool", []string{"linux"}, false},
		{"user repository runner", RepoScope("alice/dotfiles"), []string{"linux"}, "alice/dotfiles", []string{"self-hosted", "linux"}, true},
		{"missing label", OrgScope("acme"), []string{"linux"}, "acme/app", []string{"self-hosted", "linux", "gpu"}, false},
		{"labels compare case-insensitively", OrgScope("acme"), []string{"Linux", "GPU"}, "acme/app", []string{"SELF-HOSTED", "linux", "gpu"}, true},
		{"self-hosted alone matches any runner", OrgScope("acme"), []string{"linux"}, "acme/app", []string{"self-hosted"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorld(t, Config{})
			c := w.client(testToken, nil)
			sess := newScopedJIT(t, w, c, tc.scope, "r", tc.runnerLabels)
			job, err := w.QueueJob(JobSpec{Repository: tc.repo, Labels: tc.jobLabels})
			if err != nil {
				t.Fatal(err)
			}
			got := acquireNow(t, w.Server, sess)
			if (got != nil) != tc.assigned {
				t.Fatalf("assigned=%v, want %v", got != nil, tc.assigned)
			}
			j, _ := w.Job(job.ID)
			if tc.assigned && (j.Status != StatusInProgress || j.RunnerID != sess.RunnerID || j.RunnerGroupName != "Default") {
				t.Fatalf("job after assignment: %+v", j)
			}
			if !tc.assigned && j.Status != StatusQueued {
				t.Fatalf("unassigned job has status %q", j.Status)
			}
		})
	}
}

func TestEphemeralRunnerRemovedAfterItsJob(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookSecret: "s3cret", WebhookWorkers: 1})
	c := w.client(testToken, nil)
	sess := newScopedJIT(t, w, c, OrgScope("acme"), "eph-1", []string{"linux"})
	job, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	got := acquireNow(t, w.Server, sess)
	if got == nil || got.ID != job.ID || got.Repository != "acme/app" {
		t.Fatalf("acquired %+v, want job %d of acme/app", got, job.ID)
	}
	if rs := w.Runners(); len(rs) != 1 || !rs[0].Busy || rs[0].Status != "online" || rs[0].JobID != job.ID {
		t.Fatalf("runner while running: %+v", rs)
	}
	if err := NewRunnerClient(w.URL()).CompleteJob(context.Background(), sess, job.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	if rs := w.Runners(); len(rs) != 0 {
		t.Fatalf("ephemeral runner still registered after its job: %+v", rs)
	}
	j, _ := w.Job(job.ID)
	if j.Status != StatusCompleted || j.Conclusion != ConclusionSuccess || j.RunnerName != "eph-1" {
		t.Fatalf("job after completion: %+v", j)
	}
	waitHooks(t, w.Server)
	var actions []string
	for _, d := range w.Deliveries() {
		if d.JobID == job.ID {
			actions = append(actions, d.Action)
		}
	}
	if strings.Join(actions, ",") != "queued,in_progress,completed" {
		t.Fatalf("webhook actions %v, want queued,in_progress,completed", actions)
	}
}

func TestCancelQueuedJobHasNoRunner(t *testing.T) {
	w := startWorld(t, Config{})
	job, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CancelJob(job.ID); err != nil {
		t.Fatal(err)
	}
	j, _ := w.Job(job.ID)
	if j.Status != StatusCompleted || j.Conclusion != ConclusionCancelled || j.RunnerID != 0 {
		t.Fatalf("cancelled job: %+v", j)
	}
	c := w.client(testToken, nil)
	sess := newScopedJIT(t, w, c, OrgScope("acme"), "late", []string{"linux"})
	if got := acquireNow(t, w.Server, sess); got != nil {
		t.Fatalf("a cancelled job was handed out: %+v", got)
	}
	if err := w.CancelJob(job.ID); err == nil {
		t.Fatal("cancelling a completed job succeeded")
	}
}

func TestCancelRunningJobFreesPersistentRunner(t *testing.T) {
	w := startWorld(t, Config{})
	ctx := context.Background()
	c := w.client(testToken, nil)
	tok, _, err := c.Actions.CreateOrganizationRegistrationToken(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	rc := NewRunnerClient(w.URL())
	sess, err := rc.RegisterWithToken(ctx, RegisterRequest{Token: tok.GetToken(), Name: "persistent", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if rs := w.Runners(); len(rs) != 1 || rs[0].Status != "offline" || rs[0].Ephemeral || rs[0].JIT {
		t.Fatalf("registered runner: %+v, want one offline persistent runner", rs)
	}
	if err := rc.Connect(ctx, sess); err != nil {
		t.Fatal(err)
	}
	job, _ := w.QueueJob(JobSpec{Repository: "acme/lib", Labels: []string{"self-hosted", "linux", "x64", "gpu"}})
	if got := acquireNow(t, w.Server, sess); got == nil {
		t.Fatal("registered runner (default labels self-hosted, Linux, X64) got no job")
	}
	if err := w.CancelJob(job.ID); err != nil {
		t.Fatal(err)
	}
	if rs := w.Runners(); len(rs) != 1 || rs[0].Busy {
		t.Fatalf("runner after its job was cancelled: %+v, want idle and registered", rs)
	}
	if err := rc.CompleteJob(ctx, sess, job.ID, ConclusionSuccess); !errors.Is(err, ErrConflict) {
		t.Fatalf("completing a cancelled job: %v, want ErrConflict", err)
	}
}

func TestDisconnectFailsTheRunningJob(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	sess := newScopedJIT(t, w, c, RepoScope("acme/app"), "lost", []string{"linux"})
	job, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if acquireNow(t, w.Server, sess) == nil {
		t.Fatal("no job")
	}
	if err := NewRunnerClient(w.URL()).Disconnect(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	j, _ := w.Job(job.ID)
	if j.Status != StatusCompleted || j.Conclusion != ConclusionFailure {
		t.Fatalf("job of a lost runner: %+v, want completed/failure", j)
	}
	if rs := w.Runners(); len(rs) != 0 {
		t.Fatalf("ephemeral runner kept after its failed job: %+v", rs)
	}
}

func TestRegisterReplacesOnlyOfflineRunners(t *testing.T) {
	w := startWorld(t, Config{})
	ctx := context.Background()
	c := w.client(testToken, nil)
	tok, _, err := c.Actions.CreateRegistrationToken(ctx, "acme", "app")
	if err != nil {
		t.Fatal(err)
	}
	rc := NewRunnerClient(w.URL())
	req := RegisterRequest{Token: tok.GetToken(), Name: "box"}
	first, err := rc.RegisterWithToken(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Connect(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := rc.Connect(ctx, first); !errors.Is(err, ErrConflict) {
		t.Fatalf("second session: %v, want ErrConflict", err)
	}
	if _, err := rc.RegisterWithToken(ctx, req); !errors.Is(err, ErrConflict) {
		t.Fatalf("registering over an online runner: %v, want ErrConflict", err)
	}
	if err := rc.Disconnect(ctx, first); err != nil {
		t.Fatal(err)
	}
	second, err := rc.RegisterWithToken(ctx, req)
	if err != nil {
		t.Fatalf("registering over an offline runner: %v", err)
	}
	if second.RunnerID == first.RunnerID {
		t.Fatal("replacement kept the old runner id")
	}
	if err := rc.Connect(ctx, first); !isUnauthorized(err) {
		t.Fatalf("replaced runner's session: %v, want ErrUnauthorized", err)
	}
	if _, err := rc.RegisterWithToken(ctx, RegisterRequest{Token: tok.GetToken(), Name: "x", RunnerGroup: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown runner group: %v, want ErrNotFound", err)
	}
}

func TestAcquireLongPollReturnsQueuedJob(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	sess := newScopedJIT(t, w, c, OrgScope("acme"), "poller", []string{"linux"})
	if got := acquireNow(t, w.Server, sess); got != nil {
		t.Fatalf("job from an empty queue: %+v", got)
	}
	type result struct {
		job *AssignedJob
		err error
	}
	done := make(chan result, 1)
	go func() {
		j, err := NewRunnerClient(w.URL()).AcquireJob(context.Background(), sess, 50*time.Second)
		done <- result{j, err}
	}()
	job, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.job == nil || r.job.ID != job.ID {
		t.Fatalf("long poll: %+v, %v; want job %d", r.job, r.err, job.ID)
	}
	if n := w.TotalCalls(); n != 1 {
		t.Fatalf("API calls %d, want 1 (runner protocol is not counted as API)", n)
	}
	if len(w.RunnerProtocolCalls()) == 0 {
		t.Fatal("runner-protocol calls not counted")
	}
}

func TestRunsAndJobsListings(t *testing.T) {
	w := startWorld(t, Config{})
	ctx := context.Background()
	c := w.client(testToken, nil)
	sess := newScopedJIT(t, w, c, OrgScope("acme"), "lister", []string{"linux"})
	a, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}, Workflow: "Build"})
	b, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"gpu"}})
	if acquireNow(t, w.Server, sess) == nil {
		t.Fatal("no job")
	}
	queued, _, err := c.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "app", &github.ListWorkflowRunsOptions{Status: "queued"})
	if err != nil || queued.GetTotalCount() != 1 || queued.WorkflowRuns[0].GetID() != b.RunID {
		t.Fatalf("queued runs: %+v, %v; want run %d", queued, err, b.RunID)
	}
	jobs, _, err := c.Actions.ListWorkflowJobs(ctx, "acme", "app", a.RunID, nil)
	if err != nil || jobs.GetTotalCount() != 1 {
		t.Fatalf("jobs of run %d: %+v, %v", a.RunID, jobs, err)
	}
	j := jobs.Jobs[0]
	if j.GetStatus() != StatusInProgress || j.GetRunnerName() != "lister" || j.GetWorkflowName() != "Build" {
		t.Fatalf("job: status %q runner %q workflow %q", j.GetStatus(), j.GetRunnerName(), j.GetWorkflowName())
	}
	if _, _, err := c.Actions.ListWorkflowJobs(ctx, "acme", "app", 999, nil); statusOf(err) != 404 {
		t.Fatalf("jobs of unknown run: %v, want 404", err)
	}
}
