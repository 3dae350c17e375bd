package workerapp

import (
	"fmt"
	"net/http"

	"go.temporal.io/sdk/worker"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/workflows"
)

// ClusterConfig is one named cluster the worker serves. Pools that list it place runners
// there; its Kubernetes activities, its registrations and its pod watcher are this worker's.
type ClusterConfig struct {
	// Name is the cluster's name in pool specs, task-queue names and the `cluster` metric
	// label: a DNS label.
	Name string
	// Kube, when set, is the cluster's client configuration; otherwise KubeconfigPath is read,
	// and without either the in-cluster configuration is used (a worker deployed in the cluster
	// it serves).
	Kube           *rest.Config
	KubeconfigPath string
}

// clusterServer is what the worker runs for one named cluster: two workers on its task queues
// and its elected pod watcher.
type clusterServer struct {
	name    string
	kube    kubernetes.Interface
	watcher *activities.ElectedPodWatcher
}

// servesDefaultCluster: a worker with no named clusters serves the default cluster as it
// always did (its kubeconfig, else the cluster it runs in); one with named clusters serves the
// default cluster only when a configuration names it, so a worker may serve named clusters
// alone.
func servesDefaultCluster(cfg Config) bool {
	return len(cfg.Clusters) == 0 || cfg.Kube != nil || cfg.KubeconfigPath != ""
}

// validateClusters checks the named clusters: DNS labels, each once.
func validateClusters(clusters []ClusterConfig) error {
	seen := map[string]bool{}
	for i, c := range clusters {
		if errs := workflows.ValidateClusterName(c.Name, field.NewPath("clusters").Index(i)); len(errs) > 0 {
			return fmt.Errorf("cluster name: %w", errs.ToAggregate())
		}
		if seen[c.Name] {
			return fmt.Errorf("cluster %q is configured twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// buildClusters makes the clients and pod watchers of the named clusters.
func (a *App) buildClusters() error {
	if err := validateClusters(a.cfg.Clusters); err != nil {
		return err
	}
	for _, c := range a.cfg.Clusters {
		restCfg, err := restConfig(c.Kube, c.KubeconfigPath)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		var wrap func(tr http.RoundTripper) http.RoundTripper
		if a.obs.activities != nil {
			wrap = a.obs.activities.KubernetesTransportFor(c.Name)
		}
		kube, err := newKubeClient(a.cfg, restCfg, wrap)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		leaseClient, err := newKubeClient(a.cfg, restCfg, wrap)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		watcher, err := a.electedPodWatcher(kube, leaseClient, c.Name, c.KubeconfigPath)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		a.clusters = append(a.clusters, clusterServer{name: c.Name, kube: kube, watcher: watcher})
	}
	return nil
}

// clusterWorkers are the two workers of each named cluster: its Kubernetes activities and
// probe on ClusterTaskQueue, and its registrations (which write the credential into a Secret
// in that cluster) on ClusterGitHubTaskQueue, paced like the GitHub queue.
func (a *App) clusterWorkers() []worker.Worker {
	var out []worker.Worker
	for _, c := range a.clusters {
		kw := worker.New(a.temporal, workflows.ClusterTaskQueue(c.name), worker.Options{
			Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DisableWorkflowWorker: true,
			DeploymentOptions: a.deploymentOptions(),
		})
		(&activities.KubernetesActivities{Client: c.kube, Temporal: a.temporal}).Register(kw)
		(&activities.ClusterActivities{Cluster: c.name, Client: c.kube}).Register(kw)
		gw := worker.New(a.temporal, workflows.ClusterGitHubTaskQueue(c.name), worker.Options{
			Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DisableWorkflowWorker: true,
			TaskQueueActivitiesPerSecond: workflows.GitHubActivitiesPerSecond(a.cfg.GitHubPointsPerMinute),
			DeploymentOptions:            a.deploymentOptions(),
		})
		(&activities.GitHubActivities{GitHub: a.deps.GitHub, Kube: c.kube}).Register(gw)
		out = append(out, kw, gw)
	}
	return out
}

// podWatchers are the elected pod watchers this worker runs: the default cluster's, if it
// serves it, and each named cluster's, each elected by a Lease in its own cluster.
func (a *App) podWatchers() []*activities.ElectedPodWatcher {
	var out []*activities.ElectedPodWatcher
	if a.watcher != nil {
		out = append(out, a.watcher)
	}
	for _, c := range a.clusters {
		out = append(out, c.watcher)
	}
	return out
}

// taskQueues names the queues this worker polls, for its start-up log.
func (a *App) taskQueues() []string {
	out := []string{workflows.DecisionTaskQueue, workflows.TaskQueue, workflows.GitHubTaskQueue}
	for _, c := range a.clusters {
		out = append(out, workflows.ClusterTaskQueue(c.name), workflows.ClusterGitHubTaskQueue(c.name))
	}
	return out
}

// restConfig is a cluster's client configuration: as given, else its kubeconfig, else the
// in-cluster configuration. The caller's configuration is never modified.
func restConfig(kube *rest.Config, kubeconfigPath string) (*rest.Config, error) {
	if kube != nil {
		return rest.CopyConfig(kube), nil
	}
	var restCfg *rest.Config
	var err error
	if kubeconfigPath != "" {
		restCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	} else {
		restCfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes configuration: %w", err)
	}
	return restCfg, nil
}
