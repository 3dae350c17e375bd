package clusters

import (
	"testing"

	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// A pool spread over clusters a, b, served by one worker: its runners go to a while a's API
// server answers; while it hangs (SIGSTOP), new runners go to b and the runners already on a
// stay there; once a answers again everything drains, with no pod, Secret or registration
// left in either cluster or at GitHub.
func TestPoolMovesToTheNextClusterWhileTheFirstIsDown(t *testing.T) {
	ct := newClusterTest(t, "org-cl-move")
	reg := ct.startWorker("both", clusterA(), clusterB())
	const pool = "cl-move"
	ct.apply(ct.spec(pool, 2, "a", "b"))
	ct.eventually("2 idle runners on a", func() bool {
		st := ct.status(pool)
		return runnersOn(st, "a", workflows.RunnerIdle) == 2 && len(st.Runners) == 2
	}, func() string { return describe(ct.status(pool)) })

	if err := world.Kube.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := world.Kube.ResumeAPIServer(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	ct.scale(pool, 4)
	ct.eventually("2 more runners idle on b, the first 2 still on a", func() bool {
		st := ct.status(pool)
		return runnersOn(st, "b", workflows.RunnerIdle) == 2 && runnersOn(st, "a", "") == 2 && len(st.Runners) == 4
	}, func() string { return describe(ct.status(pool)) })
	if left := ct.objectsOf(pool, "b"); left == "" {
		t.Error("cluster b holds no pod or Secret of the pool")
	}
	st := ct.status(pool)
	if len(st.Clusters) != 2 || st.Clusters[0] != (workflows.ClusterRunners{Cluster: "a", Runners: 2}) ||
		st.Clusters[1] != (workflows.ClusterRunners{Cluster: "b", Runners: 2}) {
		t.Errorf("status runners per cluster %+v, want a: 2, b: 2", st.Clusters)
	}
	ct.eventually("the per-cluster gauge at a: 2, b: 2", func() bool {
		return gauge(t, reg, workflows.MetricPoolClusterRunners, map[string]string{"pool": pool, "cluster": "a"}) == 2 &&
			gauge(t, reg, workflows.MetricPoolClusterRunners, map[string]string{"pool": pool, "cluster": "b"}) == 2
	}, func() string { return describe(ct.status(pool)) })
	if g := gauge(t, reg, "runnerflow_pod_watcher_leader", map[string]string{"cluster": "b"}); g != 1 {
		t.Errorf("cluster b's pod watcher leader gauge %v, want 1 on its only worker", g)
	}
	resume()
	ct.checkNothingLeft(pool)
	if testworld.RecordingHistories() {
		record(t, workflows.PoolWorkflowID(pool), "pool-clusters")
		for _, r := range st.Runners {
			if r.Cluster == "b" {
				record(t, workflows.RunnerWorkflowID(pool, r.Name), "runner-cluster")
				break
			}
		}
	}
}

// record exports a workflow's latest run for the replay test in workflows/testdata.
func record(t *testing.T, workflowID, name string) {
	t.Helper()
	path, err := world.Temporal.RecordHistory(workflowID, "", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", path)
}

// One worker per cluster: each serves only its own cluster's queues and pod watcher, both
// run the workflows; a pool on a and a pool on b each run their jobs in their own cluster
// and drain to nothing.
func TestAWorkerPerCluster(t *testing.T) {
	ct := newClusterTest(t, "org-cl-each")
	ct.startWorker("worker-a", clusterA())
	ct.startWorker("worker-b", clusterB())
	onA, onB := ct.spec("cl-on-a", 1, "a"), ct.spec("cl-on-b", 1, "b")
	ct.apply(onA, onB)
	for _, p := range []struct{ pool, cluster string }{{onA.Name, "a"}, {onB.Name, "b"}} {
		ct.eventually("an idle runner of "+p.pool+" on "+p.cluster, func() bool {
			return runnersOn(ct.status(p.pool), p.cluster, workflows.RunnerIdle) == 1
		}, func() string { return describe(ct.status(p.pool)) })
		if left := ct.objectsOf(p.pool, p.cluster); left == "" {
			t.Errorf("cluster %s holds no pod or Secret of %s", p.cluster, p.pool)
		}
		other := map[string]string{"a": "b", "b": "a"}[p.cluster]
		if left := ct.objectsOf(p.pool, other); left != "" {
			t.Errorf("cluster %s holds %s of %s, placed on %s only", other, left, p.pool, p.cluster)
		}
		ct.runJobs(p.pool, 2)
	}
	ct.checkNothingLeft(onA.Name)
	ct.checkNothingLeft(onB.Name)
}
