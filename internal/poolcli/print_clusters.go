package poolcli

import (
	"fmt"
	"strings"

	"github.com/runnerflow/runnerflow/workflows"
)

// clusterSummary is the pool's runners per cluster in its placement order ("a 2, b 1"), the
// default cluster named "default"; empty for a pool that places on no named cluster.
func clusterSummary(byCluster []workflows.ClusterRunners) string {
	var parts []string
	for _, c := range byCluster {
		name := c.Cluster
		if name == "" {
			name = "default"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, c.Runners))
	}
	return strings.Join(parts, ", ")
}
