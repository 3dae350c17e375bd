package deploy_test

import (
	"slices"
	"testing"

	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/internal/poolspec"
)

// The several-clusters example parses with `starter apply`'s parser and is what its comments
// say: one pool placed on two clusters in order, in the namespace the worker's Role covers.
func TestExampleClusterPoolIsValid(t *testing.T) {
	pools, err := poolspec.ReadFile("examples/clusters.yaml")
	if err != nil {
		t.Fatalf("examples/clusters.yaml: %v", err)
	}
	if len(pools) != 1 {
		t.Fatalf("%d pools, want the one described", len(pools))
	}
	p := pools[0]
	if !slices.Equal(p.Clusters, []string{"eu-west", "eu-standby"}) || p.Namespace != deploy.Namespace {
		t.Errorf("want a pool on eu-west then eu-standby in %q, got clusters %v in %q", deploy.Namespace, p.Clusters, p.Namespace)
	}
}
