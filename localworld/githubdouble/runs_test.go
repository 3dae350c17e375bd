package githubdouble

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-github/v92/github"
)

// pipelineFile is issue 39's run: lint and test, then build (needs both), then a 4-way matrix
// deploy.
const pipelineFile = `name: Pipeline
on: push
jobs:
  lint:
    runs-on: [self-hosted, linux]
    steps: [{run: make lint}]
  test:
    runs-on: [self-hosted, linux]
    steps: [{run: make test}]
  build:
    needs: [lint, test]
    runs-on: [self-hosted, linux, large]
    steps: [{run: make build}]
  deploy:
    needs: build
    runs-on: [self-hosted, deploy]
    strategy:
      matrix:
        region: [eu, us]
        tier: [web, api]
    steps: [{run: make deploy}]
`

const pipelinePath = ".github/workflows/pipeline.yml"

// pushPipeline commits the pipeline to acme/app and returns the commit.
func pushPipeline(t *testing.T, w *world) string {
	t.Helper()
	sha, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: map[string]string{pipelinePath: pipelineFile}})
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// runNext has a new ephemeral runner with the labels take the oldest job it can and complete
// it with success; it returns the job, or fails when none was there.
func runNext(t *testing.T, w *world, c *github.Client, labels ...string) Job {
	t.Helper()
	sess := newScopedJIT(t, w, c, OrgScope("acme"), fmt.Sprintf("r-%d", len(w.Runners())+len(w.Jobs())), labels)
	got := acquireNow(t, w.Server, sess)
	if got == nil {
		t.Fatalf("no job for a runner labelled %v; jobs: %+v", labels, w.Jobs())
	}
	if err := NewRunnerClient(w.URL()).CompleteJob(context.Background(), sess, got.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	j, _ := w.Job(got.ID)
	return j
}

// names returns the jobs' names and states, "name:status/conclusion".
func names(jobs []Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name+":"+j.Status+"/"+j.Conclusion)
	}
	return out
}

func TestRunQueuesEachJobWhenItsNeedsComplete(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	sha := pushPipeline(t, w)
	run, err := w.StartRun(RunSpec{Repository: "acme/app", Path: pipelinePath})
	if err != nil {
		t.Fatal(err)
	}
	if run.HeadSHA != sha || run.Workflow != "Pipeline" || !slices.Equal(run.Waiting, []string{"build", "deploy"}) {
		t.Fatalf("run at start: %+v", run)
	}
	if got := names(run.Jobs); !slices.Equal(got, []string{"lint:queued/", "test:queued/"}) {
		t.Fatalf("jobs at start %v, want lint and test queued", got)
	}
	runNext(t, w, c, "linux")
	if run, _ = w.Run(run.ID); len(run.ByJob["build"]) != 0 {
		t.Fatalf("build queued before test completed: %+v", run.ByJob["build"])
	}
	runNext(t, w, c, "linux")
	run, _ = w.Run(run.ID)
	build := run.ByJob["build"]
	if len(build) != 1 || build[0].Status != StatusQueued || !slices.Equal(build[0].Labels, []string{"self-hosted", "linux", "large"}) {
		t.Fatalf("build once lint and test completed: %+v", build)
	}
	if got := runNext(t, w, c, "linux", "large"); got.ID != build[0].ID || got.HeadSHA != sha || got.RunID != run.ID {
		t.Fatalf("ran %+v, want build of run %d at %s", got, run.ID, sha)
	}
	run, _ = w.Run(run.ID)
	deploy := run.ByJob["deploy"]
	if got := names(deploy); !slices.Equal(got, []string{"deploy (1):queued/", "deploy (2):queued/", "deploy (3):queued/", "deploy (4):queued/"}) {
		t.Fatalf("deploy once build completed: %v", got)
	}
	for i := range deploy {
		if w.RunsDone(run.ID) {
			t.Fatalf("run done with %d of deploy's %d jobs to run", len(deploy)-i, len(deploy))
		}
		runNext(t, w, c, "deploy")
	}
	if !w.RunsDone(run.ID) || w.RunsDone(run.ID, run.ID+1000) {
		t.Fatal("the run is not done once every job completed, or an unknown run is")
	}
	r, _, err := c.Actions.GetWorkflowRunByID(context.Background(), "acme", "app", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetID() != run.ID || r.GetStatus() != StatusCompleted || r.GetConclusion() != ConclusionSuccess || r.GetPath() != pipelinePath || r.GetHeadSHA() != sha {
		t.Fatalf("listed run %d %s/%s path %s sha %s", r.GetID(), r.GetStatus(), r.GetConclusion(), r.GetPath(), r.GetHeadSHA())
	}
}

func TestRunSkipsTheDependantsOfAFailedJob(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookWorkers: 1})
	c := w.client(testToken, nil)
	sha := pushPipeline(t, w)
	run, err := w.StartRun(RunSpec{Repository: "acme/app", Path: pipelinePath, Conclusions: map[string]string{"Test": ConclusionFailure}})
	if err != nil {
		t.Fatal(err)
	}
	lint, test := runNext(t, w, c, "linux"), runNext(t, w, c, "linux")
	if lint.Conclusion != ConclusionSuccess || test.Conclusion != ConclusionFailure {
		t.Fatalf("lint %s, test %s: want success and the failure the run set", lint.Conclusion, test.Conclusion)
	}
	run, _ = w.Run(run.ID)
	want := []string{"lint:completed/success", "test:completed/failure", "build:completed/skipped",
		"deploy (1):completed/skipped", "deploy (2):completed/skipped", "deploy (3):completed/skipped", "deploy (4):completed/skipped"}
	if got := names(run.Jobs); !slices.Equal(got, want) || len(run.Waiting) != 0 {
		t.Fatalf("jobs %v waiting %v, want %v and none waiting", got, run.Waiting, want)
	}
	for _, j := range run.Jobs[2:] {
		if j.RunnerID != 0 {
			t.Errorf("skipped job %s has runner %d", j.Name, j.RunnerID)
		}
	}
	waitHooks(t, w.Server)
	var skipped int
	for _, h := range hr.all() {
		var ev struct {
			Action string `json:"action"`
			Job    struct {
				RunID        int64  `json:"run_id"`
				WorkflowName string `json:"workflow_name"`
				HeadSHA      string `json:"head_sha"`
				Conclusion   string `json:"conclusion"`
			} `json:"workflow_job"`
		}
		if err := json.Unmarshal(h.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Job.RunID != run.ID || ev.Job.WorkflowName != "Pipeline" || ev.Job.HeadSHA != sha {
			t.Errorf("event %s of run %d workflow %q sha %s, want run %d Pipeline %s", ev.Action, ev.Job.RunID, ev.Job.WorkflowName, ev.Job.HeadSHA, run.ID, sha)
		}
		if ev.Action == "completed" && ev.Job.Conclusion == ConclusionSkipped {
			skipped++
		}
	}
	if skipped != 5 {
		t.Errorf("%d completed events with conclusion skipped, want 5 (build and four deploys)", skipped)
	}
	r, _, err := c.Actions.GetWorkflowJobByID(context.Background(), "acme", "app", run.Jobs[2].ID)
	if err != nil || r.GetConclusion() != ConclusionSkipped || r.GetHeadSHA() != sha || r.GetWorkflowName() != "Pipeline" {
		t.Fatalf("REST job: %v %s %s %s", err, r.GetConclusion(), r.GetHeadSHA(), r.GetWorkflowName())
	}
}

// A failure the runner reports stands even where the run set no conclusion.
func TestRunnerReportedFailureSkipsDependants(t *testing.T) {
	w := startWorld(t, Config{})
	pushPipeline(t, w)
	run, err := w.StartRun(RunSpec{Repository: "acme/app", Path: pipelinePath})
	if err != nil {
		t.Fatal(err)
	}
	c := w.client(testToken, nil)
	sess := newScopedJIT(t, w, c, OrgScope("acme"), "crash", []string{"linux"})
	got := acquireNow(t, w.Server, sess)
	if err := NewRunnerClient(w.URL()).CompleteJob(context.Background(), sess, got.ID, ConclusionFailure); err != nil {
		t.Fatal(err)
	}
	runNext(t, w, c, "linux")
	run, _ = w.Run(run.ID)
	if b := run.ByJob["build"]; len(b) != 1 || b[0].Conclusion != ConclusionSkipped {
		t.Fatalf("build after a failed need: %+v", b)
	}
}

func TestStartRunRefusesWhatItCannotRun(t *testing.T) {
	w := startWorld(t, Config{})
	files := map[string]string{
		"broken.yml":     "on: push\njobs:\n  a: [\n",
		"expression.yml": "on: push\njobs:\n  a:\n    runs-on: ${{ vars.RUNNER }}\n    steps: [{run: x}]\n",
		"dynamic.yml":    "on: push\njobs:\n  a:\n    runs-on: linux\n    strategy:\n      matrix: ${{ fromJSON(vars.M) }}\n    steps: [{run: x}]\n",
		pipelinePath:     pipelineFile,
	}
	if _, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: files}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		spec    RunSpec
		mention string
	}{
		{RunSpec{Repository: "acme/app", Path: "broken.yml"}, "invalid workflow file"},
		{RunSpec{Repository: "acme/app", Path: "expression.yml"}, "runs-on"},
		{RunSpec{Repository: "acme/app", Path: "dynamic.yml"}, "matri"},
		{RunSpec{Repository: "acme/app", Path: "missing.yml"}, "no file"},
		{RunSpec{Repository: "acme/app", Path: pipelinePath, Ref: "nosuchbranch"}, "no commit"},
		{RunSpec{Repository: "acme/nope", Path: pipelinePath}, "unknown repository"},
		{RunSpec{Repository: "acme/app", Path: pipelinePath, Conclusions: map[string]string{"test": "exploded"}}, "exploded"},
		{RunSpec{Repository: "acme/app", Path: pipelinePath, Conclusions: map[string]string{"tset": ConclusionFailure}}, `no job "tset"`},
	}
	for _, tc := range cases {
		if _, err := w.StartRun(tc.spec); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("StartRun(%+v) = %v, want an error mentioning %q", tc.spec, err, tc.mention)
		}
	}
	if len(w.Jobs()) != 0 {
		t.Fatalf("refused runs made jobs: %+v", w.Jobs())
	}
}

// A job can be queued for a file the double would not run (GitHub runs what runnerflow cannot
// read): its run names the file and the commit, where the contents endpoint serves it.
func TestQueueJobOfAFileAtACommit(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	broken := "on: push\njobs:\n  a: [\n"
	sha, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: map[string]string{".github/workflows/odd.yml": broken}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.StartRun(RunSpec{Repository: "acme/app", Path: ".github/workflows/odd.yml"}); err == nil {
		t.Fatal("StartRun ran a file that does not parse")
	}
	j, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}, HeadSHA: sha, WorkflowPath: ".github/workflows/odd.yml"})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := c.Actions.GetWorkflowRunByID(ctx, "acme", "app", j.RunID)
	if err != nil || run.GetPath() != ".github/workflows/odd.yml" || run.GetHeadSHA() != sha {
		t.Fatalf("run %v: path %q sha %q, want the file at %s", err, run.GetPath(), run.GetHeadSHA(), sha)
	}
	f, _, _, err := c.Repositories.GetContents(ctx, "acme", "app", run.GetPath(), &github.RepositoryContentGetOptions{Ref: run.GetHeadSHA()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.GetContent(); got != broken {
		t.Fatalf("file of the run: %q, want %q", got, broken)
	}
}
