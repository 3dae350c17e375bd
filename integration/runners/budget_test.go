package runners

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The GitHub budget under GitHub's own limits: the double enforces the secondary limit (900
// points a rolling minute, 100 concurrent requests) and the hourly budget as GitHub documents
// them, and a burst of jobs reaches an ephemeral organization pool the way it does in
// production — signed workflow_job webhooks into the starter's intake, scale windows, the pool,
// one runner per job. runnerflow must get every job run without GitHub refusing it once.

const (
	budgetWebhookSecret = "budget test webhook secret"
	routeJIT            = "POST /orgs/{org}/actions/runners/generate-jitconfig"
	burstWait           = 5 * time.Minute
)

// TestBurstStaysInsideTheSecondaryLimit: 40 jobs at once with the double at GitHub's default
// secondary limit; every job runs once and GitHub refuses nothing.
func TestBurstStaysInsideTheSecondaryLimit(t *testing.T) {
	b := startBudgetPool(t, "burst", 40)
	jobs := b.queueJobs(40)
	b.waitJobsDone(jobs)
	b.checkEachJobRanOnce(jobs)
	b.checkNothingRefused()
}

// TestTinyHourlyBudgetWaitsForTheReset: a budget of 20 requests a minute, of which runnerflow
// may spend 80%, cannot register 20 runners in one window. The burst must still all run, with
// no refusal from GitHub: registrations pause at the reserve and go on after the reset.
func TestTinyHourlyBudgetWaitsForTheReset(t *testing.T) {
	const limit, window = 20, time.Minute
	world.GitHub.SetRateLimit(limit, window)
	t.Cleanup(func() { world.GitHub.SetRateLimit(0, 0) })
	b := startBudgetPool(t, "tiny", 20)
	jobs := b.queueJobs(20)
	b.waitJobsDone(jobs)
	b.checkEachJobRanOnce(jobs)
	b.checkNothingRefused()

	windows := callsByWindow(world.GitHub.CallLog())
	if len(windows) < 2 {
		t.Fatalf("all calls in %d window(s); a budget of %d cannot hold %d registrations", len(windows), limit, len(jobs))
	}
	first := windows[0]
	t.Logf("calls per %s window: %s", window, windowReport(windows))
	if first.jit >= len(jobs) {
		t.Errorf("all %d registrations in the first window", first.jit)
	}
	later := 0
	for _, w := range windows[1:] {
		later += w.jit
	}
	if later == 0 {
		t.Error("no registration after the first window's reset")
	}
	if kept := limit - first.calls; kept < 1 {
		t.Errorf("the first window was spent to the last request (%d of %d): no reserve kept", first.calls, limit)
	}
}

// budgetPool is one test's ephemeral organization pool, fed by the starter's webhook intake.
type budgetPool struct {
	*scenario
	c client.Client
}

// startBudgetPool starts the worker (GitHub's default pace), the intake with the double's
// webhook pointed at it, and an ephemeral organization pool of up to maxRunners runners, and
// waits until the intake routes to the pool.
func startBudgetPool(t *testing.T, name string, maxRunners int) *budgetPool {
	t.Helper()
	b := &budgetPool{scenario: newScenario(t, name)}
	startWorker(t, workerapp.Config{WatchNamespace: b.ns})
	b.c = dialTemporal(t)
	intake := b.startIntake()
	b.apply(maxRunners)
	deadline := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(intake.Pools().Pools(), func(p webhook.Pool) bool { return p.Name == b.pool }) {
		if time.Now().After(deadline) {
			t.Fatalf("the intake never routed to pool %s", b.pool)
		}
		time.Sleep(100 * time.Millisecond)
		if err := intake.Pools().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	world.GitHub.ResetCalls()
	return b
}

func (b *budgetPool) startIntake() *webhook.Handler {
	b.t.Helper()
	h, err := webhook.NewHandler(webhook.Config{
		Secret: []byte(budgetWebhookSecret), Temporal: b.c, Logger: quietLogger(),
		Metrics: webhook.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		b.t.Fatal(err)
	}
	srv := httptest.NewServer(h.Routes())
	world.GitHub.SetWebhookSecret(budgetWebhookSecret)
	world.GitHub.SetWebhookURL(srv.URL + "/webhook")
	b.t.Cleanup(func() {
		world.GitHub.SetWebhookURL("")
		world.GitHub.SetWebhookSecret("")
		srv.Close()
	})
	return h
}

func (b *budgetPool) apply(maxRunners int) {
	b.t.Helper()
	spec := workflows.PoolSpec{
		Name: b.pool, Organization: b.org, Labels: runnerLabels, MaxReplicas: &maxRunners, Namespace: b.ns,
		ScaleDownDelay: &metav1.Duration{Duration: time.Second},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"},
		}}},
	}.WithDefaults()
	if _, err := poolcli.Apply(context.Background(), b.c, []workflows.PoolSpec{spec}); err != nil {
		b.t.Fatalf("apply: %v", err)
	}
	b.t.Cleanup(b.terminate)
}

// terminate ends the pool and any of its runner workflows still running, so no later test's
// worker picks up their tasks.
func (b *budgetPool) terminate() {
	ctx := context.Background()
	_ = b.c.TerminateWorkflow(ctx, workflows.PoolWorkflowID(b.pool), "", "test over")
	resp, err := b.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`RunnerPool = %q AND ExecutionStatus = "Running"`, b.pool),
	})
	if err != nil {
		return
	}
	for _, e := range resp.GetExecutions() {
		_ = b.c.TerminateWorkflow(ctx, e.GetExecution().GetWorkflowId(), "", "test over")
	}
}

func (b *budgetPool) waitJobsDone(jobs []int64) {
	b.t.Helper()
	eventually(b.t, burstWait, fmt.Sprintf("%d jobs completed (calls so far: %s)", len(jobs), githubCallReport()), func() bool {
		for _, id := range jobs {
			if j, ok := world.GitHub.Job(id); !ok || j.Status != githubdouble.StatusCompleted {
				return false
			}
		}
		return true
	})
}

// checkEachJobRanOnce: every job completed successfully on its own runner of the pool.
func (b *budgetPool) checkEachJobRanOnce(jobs []int64) {
	b.t.Helper()
	ranBy := map[string]int64{}
	for _, id := range jobs {
		j, _ := world.GitHub.Job(id)
		if j.Conclusion != githubdouble.ConclusionSuccess || !strings.HasPrefix(j.RunnerName, b.pool+"-") {
			b.t.Errorf("job %d: %s on %q, want success on a runner of pool %s", id, j.Conclusion, j.RunnerName, b.pool)
		}
		if other, dup := ranBy[j.RunnerName]; dup {
			b.t.Errorf("runner %s ran jobs %d and %d", j.RunnerName, other, id)
		}
		ranBy[j.RunnerName] = id
	}
	b.t.Logf("%d registrations for %d jobs", world.GitHub.CallCount(routeJIT), len(jobs))
}

// checkNothingRefused: GitHub answered runnerflow no 403 and no 429.
func (b *budgetPool) checkNothingRefused() {
	b.t.Helper()
	b.t.Logf("GitHub API calls: %s", githubCallReport())
	for k, n := range world.GitHub.Calls() {
		if k.Status == http.StatusForbidden || k.Status == http.StatusTooManyRequests {
			b.t.Errorf("GitHub refused %d call(s) of %s with %d", n, k.Route, k.Status)
		}
	}
}

// window is the calls counted in one primary rate-limit window.
type window struct {
	reset      time.Time
	calls, jit int
	first      time.Time
}

// callsByWindow groups the call log by the window each call was counted in, oldest first.
func callsByWindow(log []githubdouble.Call) []window {
	byReset := map[time.Time]*window{}
	for _, c := range log {
		w, ok := byReset[c.RateReset]
		if !ok {
			w = &window{reset: c.RateReset, first: c.At}
			byReset[c.RateReset] = w
		}
		w.calls++
		if c.Route == routeJIT {
			w.jit++
		}
	}
	var out []window
	for _, w := range byReset {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].reset.Before(out[j].reset) })
	return out
}

func windowReport(ws []window) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("[from %s to reset %s: %d calls, %d registrations]",
			w.first.Format("15:04:05.000"), w.reset.Format("15:04:05"), w.calls, w.jit))
	}
	return strings.Join(parts, " ")
}
