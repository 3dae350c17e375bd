package runners

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestEvictedIdleRunnersStillActOnDrainAndPodEnd: the worker bounds its sticky workflow cache
// (workflows.StickyWorkflowCacheSize) so that idle runners do not hold memory for hours; an
// evicted runner is replayed from its history when it is next told something. Here the cache
// holds one workflow and three persistent runners sit idle, so at most one of them is in memory
// when they are told to act: one is drained through its update, one loses its pod (the pod
// watcher's signal), one is drained by signal. Each acts as a cached runner would, nothing of
// them is left, and the SDK's counters show the evictions and the replays from history.
func TestEvictedIdleRunnersStillActOnDrainAndPodEnd(t *testing.T) {
	s := newScenario(t, "evict")
	reg := prometheus.NewRegistry()
	// Size 2 holds one workflow: the SDK's cache keeps one fewer than its size.
	startWorker(t, workerapp.Config{WatchNamespace: s.ns, Metrics: reg, StickyWorkflowCacheSize: 2})
	c := dialTemporal(t)
	inputs := []workflows.RunnerInput{s.input(1, false, nil), s.input(2, false, nil), s.input(3, false, nil)}
	runs := s.start(c, inputs...)
	s.waitPodsRunning(len(inputs))
	for _, run := range runs {
		// What the pool's listing tells a runner GitHub lists online.
		if err := c.SignalWorkflow(context.Background(), run.GetID(), "", workflows.SignalRunnerStatus,
			workflows.RunnerStatusSignal{Online: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range runs {
		waitRunnerState(t, c, run.GetID(), workflows.RunnerIdle)
	}
	eventually(t, 30*time.Second, "an eviction from the sticky cache", func() bool {
		return counter(t, reg, "temporal_sticky_cache_total_forced_eviction_total") > 0
	})
	missesIdle := counter(t, reg, "temporal_sticky_cache_miss_total")

	// An update to an evicted workflow may fail its first workflow task ("premature end of
	// stream": the history the worker fetches to replay lacks the update's speculative task,
	// temporalio/temporal#7741, fixed by temporalio/temporal#9325, which the test world's server
	// 1.29.1 predates); the retry takes it, so the update completes.
	drain, err := c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: runs[0].GetID(), UpdateName: workflows.UpdateDrain, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.DrainRequest{Reason: "scale-down"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var accepted workflows.DrainResult
	if err := drain.Get(context.Background(), &accepted); err != nil || accepted.State != workflows.RunnerDraining {
		t.Fatalf("drain update = %+v, %v; want accepted as draining", accepted, err)
	}
	if err := world.Kubernetes.CoreV1().Pods(s.ns).Delete(context.Background(), inputs[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(context.Background(), runs[2].GetID(), "", workflows.SignalDrain,
		workflows.DrainRequest{Reason: "rollout"}); err != nil {
		t.Fatal(err)
	}

	res := results(t, runs, 3*time.Minute)
	if res[0].Reason != "drained: scale-down" || res[2].Reason != "drained: rollout" {
		t.Errorf("drained runners ended %+v and %+v", res[0], res[2])
	}
	if res[1].FinalState == workflows.RunnerFailed || strings.HasPrefix(res[1].Reason, "drained") {
		t.Errorf("runner whose pod was deleted ended %+v, want it ended by its pod", res[1])
	}
	s.assertCleanEnd(c, runs)
	// At most one of the three was cached when they were told to act: the others took their
	// news after a replay from history (a sticky-cache miss each).
	eventually(t, 30*time.Second, "the evicted runners' replays in the SDK's counters", func() bool {
		return counter(t, reg, "temporal_sticky_cache_miss_total") > missesIdle
	})
	t.Logf("sticky cache: %.0f forced evictions, %.0f misses after the runners were idle",
		counter(t, reg, "temporal_sticky_cache_total_forced_eviction_total"), counter(t, reg, "temporal_sticky_cache_miss_total")-missesIdle)
}

// waitPodsRunning waits until n runner pods of the scenario run.
func (s *scenario) waitPodsRunning(n int) {
	s.t.Helper()
	eventually(s.t, 2*time.Minute, "the runner pods to run", func() bool {
		pods, err := world.Kubernetes.CoreV1().Pods(s.ns).List(context.Background(), metav1.ListOptions{LabelSelector: managedSelector})
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return err == nil && running == n
	})
}

// waitRunnerState waits until the runner's status query answers state.
func waitRunnerState(t *testing.T, c client.Client, id string, state workflows.RunnerState) {
	t.Helper()
	eventually(t, time.Minute, "runner "+id+" to be "+string(state), func() bool {
		v, err := c.QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
		var st workflows.RunnerStatus
		return err == nil && v.Get(&st) == nil && st.State == state
	})
}

// counter sums a counter's series in the registry the worker reports the SDK's metrics to.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
