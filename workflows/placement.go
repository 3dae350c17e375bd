package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Several clusters. A worker serves the default cluster (its --kubeconfig, or the cluster it
// runs in) and any number of named ones. A named cluster's Kubernetes activities run on a task
// queue of its own (ClusterTaskQueue), polled only by workers that hold a client for it, and
// its registrations (which write the credential into a Secret in that cluster) on a paced queue
// of its own (ClusterGitHubTaskQueue). The default cluster keeps TaskQueue and GitHubTaskQueue,
// so pools and runners that name no cluster issue exactly the commands they always did.
//
// A pool names an ordered list of clusters (PoolSpec.Clusters). Each batch of new runners is
// placed on the first cluster whose API answers a probe (ActivityProbeCluster on that cluster's
// queue, under ClusterProbePolicy: a worker serving it read its API server within a few
// seconds); a cluster that does not answer is skipped for that batch. A runner's cluster is
// fixed for its life (RunnerInput.Cluster), so runners already running stay where they are.

// ActivityProbeCluster reads the cluster's API server once (its version): the placement's test
// that a cluster answers. Runs on the cluster's ClusterTaskQueue.
const ActivityProbeCluster = "ProbeCluster"

// changeClusterPlacement gates probing a pool's clusters before starting a batch of runners.
// Asked only by a pool that names clusters, so a pool without them carries no marker.
const changeClusterPlacement = "cluster-placement"

// ProbeClusterInput names the cluster probed; the worker checks it serves that cluster.
type ProbeClusterInput struct {
	Cluster string `json:"cluster"`
}

// ProbeClusterOutput is what the API server answered.
type ProbeClusterOutput struct {
	// Version is the API server's version (GitVersion).
	Version string `json:"version,omitempty"`
}

// ClusterTaskQueue is the task queue of a named cluster's Kubernetes activities; the default
// cluster ("") keeps TaskQueue.
func ClusterTaskQueue(cluster string) string {
	if cluster == "" {
		return TaskQueue
	}
	return TaskQueue + "-cluster-" + cluster
}

// ClusterGitHubTaskQueue is the paced task queue of a named cluster's registrations (GitHub
// calls that write into that cluster); the default cluster ("") keeps GitHubTaskQueue.
func ClusterGitHubTaskQueue(cluster string) string {
	if cluster == "" {
		return GitHubTaskQueue
	}
	return ClusterTaskQueue(cluster) + "-github"
}

// ValidateClusterName checks a cluster's name as a pool or a worker gives it: a DNS label
// (it becomes part of task-queue names and the `cluster` metric label).
func ValidateClusterName(name string, path *field.Path) field.ErrorList {
	return dnsLabel(name, path)
}

// validateClusters: clusters are distinct DNS labels. Warm registrations and slot claims live
// in one cluster, which a placement that moves between clusters cannot promise, so a pool
// with clusters has neither (yet).
func (s PoolSpec) validateClusters(path *field.Path) field.ErrorList {
	if len(s.Clusters) == 0 {
		return nil
	}
	p := path.Child("clusters")
	var errs field.ErrorList
	for i, c := range s.Clusters {
		errs = append(errs, ValidateClusterName(c, p.Index(i))...)
		if slices.Index(s.Clusters, c) < i {
			errs = append(errs, field.Duplicate(p.Index(i), c))
		}
	}
	if s.WarmRegistrations > 0 {
		errs = append(errs, field.Forbidden(path.Child("warmRegistrations"),
			"a pool placed on clusters keeps no warm registrations (a registration's Secret lives in one cluster)"))
	}
	if len(s.VolumeClaimTemplates) > 0 {
		errs = append(errs, field.Forbidden(path.Child("volumeClaimTemplates"),
			"a pool placed on clusters cannot be stateful (a slot's claims live in one cluster)"))
	}
	return errs
}

// ClusterProbe is one cluster's answer to the placement probe.
type ClusterProbe struct {
	Cluster string `json:"cluster"`
	// Error is why the probe failed (timed out, no worker serving the cluster, API error).
	Error string `json:"error,omitempty"`
}

// Placement is where a batch of runners goes, and why.
type Placement struct {
	Cluster string `json:"cluster"`
	Why     string `json:"why"`
}

// place decides a batch's cluster from the probes made so far, in the pool's order: the first
// that answered. When none did, the batch goes to the first cluster anyway: its runners'
// Kubernetes activities retry there (KubernetesActivityPolicy), which beats holding jobs back
// while every cluster is down. ok is false while a cluster not yet probed might still answer.
func place(clusters []string, probes []ClusterProbe) (Placement, bool) {
	for _, pr := range probes {
		if pr.Error == "" {
			why := "first cluster whose API answers"
			if pr.Cluster != clusters[0] {
				why = fmt.Sprintf("%s: earlier clusters did not answer (%s)", why, probes[0].Error)
			}
			return Placement{Cluster: pr.Cluster, Why: why}, true
		}
	}
	if len(probes) < len(clusters) {
		return Placement{}, false
	}
	return Placement{Cluster: clusters[0], Why: "no cluster answers; waiting on the first"}, true
}

// placeBatch probes the pool's clusters in order until one answers and places runners there.
// A pool with no clusters places nothing (its runners use the default cluster), issuing no
// command.
func (p *poolRun) placeBatch(ctx workflow.Context, runners []RunnerInput) []RunnerInput {
	clusters := p.st.Spec.Clusters
	if len(clusters) == 0 || workflow.GetVersion(ctx, changeClusterPlacement, workflow.DefaultVersion, 1) < 1 {
		return runners
	}
	var probes []ClusterProbe
	for {
		if pl, ok := place(clusters, probes); ok {
			p.logger.Info("Runners placed", "cluster", pl.Cluster, "runners", len(runners), "why", pl.Why)
			out := make([]RunnerInput, len(runners))
			for i, r := range runners {
				r.Cluster = pl.Cluster
				out[i] = r
				if j := p.find(r.Name); j >= 0 {
					p.st.Runners[j].Cluster = pl.Cluster
				}
			}
			return out
		}
		c := clusters[len(probes)]
		_, err := probeCluster(ctx, c)
		pr := ClusterProbe{Cluster: c}
		if err != nil {
			pr.Error = err.Error()
		}
		probes = append(probes, pr)
	}
}

func probeCluster(ctx workflow.Context, cluster string) (ProbeClusterOutput, error) {
	return runActivity[ProbeClusterInput, ProbeClusterOutput](ctx, ForCluster(ClusterProbePolicy, cluster),
		ActivityProbeCluster, ProbeClusterInput{Cluster: cluster})
}

// runnersByCluster counts runners per cluster, in the pool's cluster order, then any other
// cluster a runner was placed on (the list changed since), then the default cluster. Nil for a
// pool that never placed a runner on a named cluster.
func runnersByCluster(clusters []string, runners []PoolRunner) []ClusterRunners {
	named := false
	for _, r := range runners {
		named = named || r.Cluster != ""
	}
	if !named && len(clusters) == 0 {
		return nil
	}
	order := slices.Clone(clusters)
	for _, r := range runners {
		if !slices.Contains(order, r.Cluster) {
			order = append(order, r.Cluster)
		}
	}
	out := make([]ClusterRunners, len(order))
	for i, c := range order {
		out[i].Cluster = c
		for _, r := range runners {
			if r.Cluster == c {
				out[i].Runners++
			}
		}
	}
	return out
}

// recordClusterMetrics publishes runners per cluster (runnerflow_pool_cluster_runners) for a
// pool that names clusters; cluster names come from pool specs that workers serve, so the
// label stays bounded.
func (p *poolRun) recordClusterMetrics() {
	byCluster := runnersByCluster(p.st.Spec.Clusters, p.st.Runners)
	if len(byCluster) == 0 {
		return
	}
	m := workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name})
	for _, c := range byCluster {
		m.WithTags(map[string]string{"cluster": c.Cluster}).Gauge(MetricPoolClusterRunners).Update(float64(c.Runners))
	}
}

// MetricPoolClusterRunners is the gauge of a pool's runners per cluster.
const MetricPoolClusterRunners = "runnerflow_pool_cluster_runners"
