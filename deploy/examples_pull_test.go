package deploy_test

import (
	"testing"

	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/internal/poolspec"
	"github.com/runnerflow/runnerflow/workflows"
)

// The pull examples parse with the parser `starter apply` uses and are what their comments
// say: an organization pool reading its repositories' jobs, and a persistent pool scaled by
// the share of its runners busy, both in the namespace the worker's Role covers.
func TestExamplePullPoolsAreValid(t *testing.T) {
	pools, err := poolspec.ReadFile("examples/pull-pools.yaml")
	if err != nil {
		t.Fatalf("examples/pull-pools.yaml: %v", err)
	}
	if len(pools) != 2 {
		t.Fatalf("%d pools, want the two described", len(pools))
	}
	queued, busy := pools[0], pools[1]
	if queued.Pull == nil || queued.Pull.Metric != workflows.PullMetricQueuedJobs || queued.Organization == "" || len(queued.Pull.Repositories) == 0 {
		t.Errorf("org-pull: want an organization pool reading its repositories' jobs, got %+v", queued.Pull)
	}
	if busy.Pull == nil || busy.Pull.Metric != workflows.PullMetricBusyPercentage || busy.IsEphemeral() || *busy.Pull.ScaleUpFactor != 2 {
		t.Errorf("org-busy: want a persistent pool scaled by its busy share, got %+v", busy.Pull)
	}
	for _, p := range pools {
		if p.Namespace != deploy.Namespace {
			t.Errorf("pool %s puts runners in %q; the worker's Role covers %q only", p.Name, p.Namespace, deploy.Namespace)
		}
	}
}
