package workflows

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkflowsImportNoClients keeps workflow code deterministic by construction: nothing in
// this package, directly or through its dependencies, may reach Kubernetes, GitHub or
// Prometheus clients, or the activities that wrap them.
func TestWorkflowsImportNoClients(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"k8s.io/client-go",
		"github.com/google/go-github",
		"github.com/bradleyfalzon/ghinstallation",
		"github.com/prometheus/",
		"github.com/runnerflow/runnerflow/activities",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list returned too few packages to be real: %v", deps)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("workflows depends on %s (forbidden prefix %s)", dep, f)
			}
		}
	}
}
