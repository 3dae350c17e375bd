package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/metricsdoc"
	"github.com/runnerflow/runnerflow/workflows"
)

// gaugePoolYAML is a pool that scales only when told to (min 0, no delay before scaling down),
// so the test decides every change the gauges must follow.
const gaugePoolYAML = `
name: gauges
organization: gauge-org
labels: [self-hosted, linux, gauges]
minReplicas: 0
maxReplicas: 6
scaleDownDelay: 0s
namespace: runnerflow
template:
  spec:
    restartPolicy: Never
    containers:
      - name: runner
        image: ghcr.io/actions/actions-runner:2.328.0
`

// The whole system's metrics, from one registry: the pool gauges follow the pool's status
// query through a scaling run, runnerflow's series are the documented ones and pass the
// linter, and the GitHub counters agree with what GitHub saw.
func TestMetricsEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sys, err := Start(ctx, SystemConfig{WorkDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Stop()
	if err := sys.World.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: "gauge-org/app"}); err != nil {
		t.Fatal(err)
	}
	if err := sys.ApplyPools(ctx, []byte(gaugePoolYAML), io.Discard); err != nil {
		t.Fatal(err)
	}

	t.Run("pool gauges match the status query through a scaling run", func(t *testing.T) {
		scale(t, sys.Temporal, "gauges", 3)
		settle(t, sys, "gauges", func(st workflows.PoolStatus) bool { return st.RunnersByState[workflows.RunnerIdle] == 3 })
		queueJobs(t, sys, 2)
		settle(t, sys, "gauges", func(st workflows.PoolStatus) bool {
			return st.Totals.Finished >= 2 && st.RunnersByState[workflows.RunnerIdle] == 3 && st.Reservations == 0
		})
		scale(t, sys.Temporal, "gauges", 0)
		settle(t, sys, "gauges", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 && st.Desired == 0 })
	})
	t.Run("runnerflow's series are documented and lint clean", func(t *testing.T) {
		checkDocumented(t, sys)
	})
	t.Run("GitHub requests are counted as GitHub saw them", func(t *testing.T) {
		checkGitHubCounts(t, sys)
	})
	t.Run("the worker binary serves its metrics and stops on SIGTERM", func(t *testing.T) {
		runWorkerBinary(t, sys)
	})
}

func scale(t *testing.T, c client.Client, pool string, minimum int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.PoolWorkflowID(pool), UpdateName: workflows.UpdateScale,
		Args: []any{workflows.ScaleRequest{Min: &minimum}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.ScaleResult
	if err := h.Get(ctx, &res); err != nil || res.Bounds.Min != minimum {
		t.Fatalf("scale %s to min %d: %+v, %v", pool, minimum, res, err)
	}
}

func queueJobs(t *testing.T, sys *System, n int) {
	t.Helper()
	for range n {
		if _, err := sys.World.GitHub.QueueJob(githubdouble.JobSpec{Repository: "gauge-org/app", Labels: []string{"self-hosted", "gauges"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits until the pool's status satisfies done and the pool's gauges say what its
// status says: desired, reservations and every state's count.
func settle(t *testing.T, sys *System, pool string, done func(workflows.PoolStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var st workflows.PoolStatus
	var diff []string
	for time.Now().Before(deadline) {
		var err error
		if st, err = poolcli.Status(context.Background(), sys.Temporal, pool); err != nil {
			t.Fatal(err)
		}
		if diff = gaugeDiff(t, sys, st); done(st) && len(diff) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pool %s did not settle with gauges matching its status: runners %v desired %d reservations %d; gauge differences %v",
		pool, st.RunnersByState, st.Desired, st.Reservations, diff)
}

// gaugeDiff lists where the pool's gauges disagree with its status.
func gaugeDiff(t *testing.T, sys *System, st workflows.PoolStatus) []string {
	t.Helper()
	fams := gatherByName(t, sys)
	want := map[string]float64{
		"runnerflow_pool_desired_runners": float64(st.Desired),
		"runnerflow_pool_reservations":    float64(st.Reservations),
	}
	for _, s := range []workflows.RunnerState{workflows.RunnerPending, workflows.RunnerRegistering, workflows.RunnerIdle, workflows.RunnerBusy, workflows.RunnerDraining} {
		want["runnerflow_pool_runners/"+string(s)] = float64(st.RunnersByState[s])
	}
	var diff []string
	for key, w := range want {
		name, state, _ := strings.Cut(key, "/")
		got, ok := gaugeValue(fams[name], map[string]string{"pool": st.Name, "state": state})
		if !ok || got != w {
			diff = append(diff, fmt.Sprintf("%s=%v (found %t) want %v", key, got, ok, w))
		}
	}
	slices.Sort(diff)
	return diff
}

func gaugeValue(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		if hasLabels(m, labels) {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for name, value := range want {
		if value == "" {
			continue
		}
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func gatherByName(t *testing.T, sys *System) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := sys.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// sdkWorkflowTags are the labels the Temporal SDK adds to every metric a workflow records.
var sdkWorkflowTags = []string{"namespace", "task_queue", "workflow_type", "worker_type", "activity_type", "client_name"}

// checkDocumented holds the registry's runnerflow_ series to docs/metrics.md: each is listed
// with its type and labels (workflow metrics also carry the SDK's workflow tags), and every
// listed series that this run must have produced is there. Then the linter runs over them.
func checkDocumented(t *testing.T, sys *System) {
	t.Helper()
	doc := metricsdoc.Read(t, "../../docs/metrics.md")
	fams := gatherByName(t, sys)
	var names []string
	for name, f := range fams {
		if !strings.HasPrefix(name, "runnerflow_") {
			continue
		}
		names = append(names, name)
		d, ok := doc[name]
		if !ok {
			t.Errorf("%s is exported but not in docs/metrics.md", name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != d.Kind {
			t.Errorf("%s is a %s, documented as a %s", name, got, d.Kind)
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if !slices.Contains(sdkWorkflowTags, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
			slices.Sort(labels)
			if !slices.Equal(labels, d.Labels) {
				t.Errorf("%s has labels %v, documented %v", name, labels, d.Labels)
				break
			}
		}
	}
	// Everything must have appeared but the series of what this run never meets: a failed
	// Kubernetes request, an orphan for reconcile to remove (integration/pools counts those
	// removals), a pool placed on named clusters (integration/clusters reads that gauge), and
	// a failed webhook delivery to redeliver (integration/faults), and a queued job no pool
	// fits (integration/webhooks, TestWhyExplainsJobsTheIntakeTookOrMissed, counts those).
	neverMet := []string{"runnerflow_kubernetes_errors_total", "runnerflow_reconcile_removed_total", "runnerflow_pool_cluster_runners",
		"runnerflow_reconcile_redelivered_total", "runnerflow_webhook_unmatched_jobs_total"}
	// Nor a scale-set pool (the workflows' unit tests record its gauges), nor a pool that
	// prewarms (integration/pools' TestPrewarmStartsBuildsRunnerBeforeBuildIsQueued reads its
	// counters from the worker's registry).
	for name := range doc {
		if strings.HasPrefix(name, "runnerflow_scaleset_") || strings.HasPrefix(name, "runnerflow_pool_prewarm_") {
			neverMet = append(neverMet, name)
		}
	}
	for name := range doc {
		if _, ok := fams[name]; !ok && !slices.Contains(neverMet, name) {
			t.Errorf("%s is documented but this run never produced it", name)
		}
	}
	slices.Sort(names)
	problems, err := testutil.GatherAndLint(sys.Registry, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// checkGitHubCounts compares the worker's request counter with the double's own count of the
// calls it answered, route template by route template.
func checkGitHubCounts(t *testing.T, sys *System) {
	t.Helper()
	byRoute := map[string]float64{}
	for key, n := range sys.World.GitHub.Calls() {
		byRoute[key.Route] += float64(n)
	}
	counted := map[string]float64{}
	for _, m := range gatherByName(t, sys)["runnerflow_github_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "endpoint" {
				counted[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	if len(byRoute) == 0 {
		t.Fatal("GitHub saw no calls")
	}
	for route, n := range byRoute {
		if counted[route] != n {
			t.Errorf("%s: GitHub answered %v calls, the worker counted %v", route, n, counted[route])
		}
	}
	for route := range counted {
		if _, ok := byRoute[route]; !ok {
			t.Errorf("the worker counted calls to %s, which GitHub never saw", route)
		}
	}
}
