package runners

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// One world for the package; tests run one after another, each in its own namespace and its
// own organization at the double, and each resets the double's call counters.
var world *testworld.World

func TestMain(m *testing.M) {
	os.Exit(testworld.RunTests(m, testworld.WorldOptions{WorkDuration: time.Second}, &world))
}

// quietLogger keeps test output to warnings and errors.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func dialTemporal(t *testing.T) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(quietLogger()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startWorker runs the in-process worker until the test ends.
func startWorker(t *testing.T, cfg workerapp.Config) {
	t.Helper()
	cfg.TemporalAddress, cfg.Namespace = world.Temporal.Address, world.Temporal.Namespace
	if cfg.Kube == nil {
		cfg.Kube = world.Kube.Config
	}
	cfg.GitHub.BaseURL, cfg.GitHub.Token = world.GitHub.URL(), world.GitHubToken
	cfg.Logger = quietLogger()
	app, err := workerapp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

// scenario is one test's pool of runners: an organization at the double with one repository,
// and a namespace.
type scenario struct {
	t    *testing.T
	pool string
	org  string
	ns   string
}

func newScenario(t *testing.T, pool string) *scenario {
	t.Helper()
	s := &scenario{t: t, pool: pool, org: "org-" + pool, ns: world.Kube.NewNamespace(t)}
	if err := world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: s.org + "/app"}); err != nil {
		t.Fatal(err)
	}
	world.GitHub.ResetCalls()
	return s
}

var runnerLabels = []string{"self-hosted", "linux"}

// input is runner seq's workflow input; annotations go onto the pod template (the simulator
// reads its per-pod work duration from there).
func (s *scenario) input(seq int64, ephemeral bool, annotations map[string]string) workflows.RunnerInput {
	name := workflows.RunnerName(s.pool, "0001", seq)
	return workflows.RunnerInput{
		Pool: s.pool, Name: name,
		Spec: workflows.RunnerSpec{
			Scope: workflows.Scope{Organization: s.org}, Labels: runnerLabels, Ephemeral: ephemeral,
			Namespace: s.ns, TemplateHash: "t1",
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"},
				}},
			},
		},
	}
}

// start starts runner workflows the way the pool does (same id, task queue, search attributes).
func (s *scenario) start(c client.Client, inputs ...workflows.RunnerInput) []client.WorkflowRun {
	s.t.Helper()
	var runs []client.WorkflowRun
	for _, in := range inputs {
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: workflows.RunnerWorkflowID(in.Pool, in.Name), TaskQueue: workflows.TaskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SearchAttrPool.ValueSet(in.Pool)),
		}, workflows.RunnerWorkflowType, in)
		if err != nil {
			s.t.Fatal(err)
		}
		runs = append(runs, run)
	}
	return runs
}

func (s *scenario) queueJobs(n int) []int64 {
	s.t.Helper()
	var ids []int64
	for range n {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: s.org + "/app", Labels: runnerLabels})
		if err != nil {
			s.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// results waits for every run and returns their results; a failed run fails the test.
func results(t *testing.T, runs []client.WorkflowRun, timeout time.Duration) []workflows.RunnerResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []workflows.RunnerResult
	for _, run := range runs {
		var res workflows.RunnerResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatalf("runner workflow %s: %v", run.GetID(), err)
		}
		out = append(out, res)
	}
	return out
}

// eventually polls cond until it holds or the timeout passes; what says what was awaited.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
