package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/workflows"
)

// ClusterActivities answer for one cluster as a whole. A worker registers them on that
// cluster's task queue (workflows.ClusterTaskQueue), so a task reaches only workers that hold
// a client for the cluster.
type ClusterActivities struct {
	// Cluster is the cluster's name ("" for the default cluster).
	Cluster string
	Client  kubernetes.Interface
}

// Register registers the activities under their workflow-facing names.
func (a *ClusterActivities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.ProbeCluster, activity.RegisterOptions{Name: workflows.ActivityProbeCluster})
}

// ProbeCluster reads the API server's version: the cheapest request that needs a live API
// server (no object, no RBAC beyond discovery), so a pool can tell that the cluster answers
// before placing runners there. A hung API server is cut off by the activity's own timeout
// (workflows.ClusterProbePolicy), through ctx.
func (a *ClusterActivities) ProbeCluster(ctx context.Context, in workflows.ProbeClusterInput) (workflows.ProbeClusterOutput, error) {
	if in.Cluster != a.Cluster {
		// Only a worker misconfigured to poll another cluster's queue gets here.
		return workflows.ProbeClusterOutput{}, temporal.NewApplicationError(
			fmt.Sprintf("this worker serves cluster %q, not %q", a.Cluster, in.Cluster), workflows.ErrClusterNotServed)
	}
	body, err := a.Client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return workflows.ProbeClusterOutput{}, classifyKubernetesError("probe cluster "+in.Cluster, err)
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil {
		return workflows.ProbeClusterOutput{}, temporal.NewApplicationError("probe cluster "+in.Cluster+": "+err.Error(), workflows.ErrTransient)
	}
	return workflows.ProbeClusterOutput{Version: v.GitVersion}, nil
}
