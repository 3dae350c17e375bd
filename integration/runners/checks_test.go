package runners

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

var managedSelector = runnerpod.LabelManagedBy + "=" + runnerpod.ManagedByValue

// assertCleanEnd checks the end state every finished pool of runners must leave: no runner pod,
// no runner secret, no runner registration at GitHub, every runner workflow Completed.
func (s *scenario) assertCleanEnd(c client.Client, runs []client.WorkflowRun) {
	s.t.Helper()
	ctx := context.Background()
	// The workflow deletes the runner's Secret; the garbage collector deletes the pod the Secret
	// owns, and the simulated kubelet finishes that.
	eventually(s.t, time.Minute, "runner pods to be gone", func() bool {
		pods, err := world.Kubernetes.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: managedSelector})
		return err == nil && len(pods.Items) == 0
	})
	secrets, err := world.Kubernetes.CoreV1().Secrets(s.ns).List(ctx, metav1.ListOptions{LabelSelector: managedSelector})
	if err != nil || len(secrets.Items) != 0 {
		s.t.Errorf("runner secrets left: %d (%v)", len(secrets.Items), err)
	}
	if left := s.registrations(); len(left) != 0 {
		s.t.Errorf("runners left at GitHub: %+v", left)
	}
	for _, run := range runs {
		desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil {
			s.t.Fatal(err)
		}
		if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			s.t.Errorf("workflow %s is %s, want Completed", run.GetID(), st)
		}
	}
}

// registrations are the scenario organization's runners at the double.
func (s *scenario) registrations() []githubdouble.Runner {
	var out []githubdouble.Runner
	for _, r := range world.GitHub.Runners() {
		if r.Scope == githubdouble.OrgScope(s.org) {
			out = append(out, r)
		}
	}
	return out
}

// assertNoCredentialInHistory reads every runner workflow's full history from the server and
// searches the raw event bytes (payloads are stored as JSON text inside them) for every
// credential the double ever issued: JIT configurations, runner credentials, registration
// tokens, installation tokens and the worker's own token.
func assertNoCredentialInHistory(t *testing.T, c client.Client, runs []client.WorkflowRun) {
	t.Helper()
	secrets := world.GitHub.IssuedSecrets()
	if len(secrets) < len(runs) {
		t.Fatalf("only %d credentials issued for %d runners: the scan would prove nothing", len(secrets), len(runs))
	}
	for _, run := range runs {
		raw := historyBytes(t, c, run.GetID(), run.GetRunID())
		if leaked := findSecrets(raw, secrets); len(leaked) > 0 {
			t.Errorf("history of %s carries %d credential(s)", run.GetID(), len(leaked))
		}
	}
}

func historyBytes(t *testing.T, c client.Client, id, runID string) []byte {
	t.Helper()
	raw, err := testworld.HistoryBytes(context.Background(), c, id, runID)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// findSecrets returns the secrets that occur in raw.
func findSecrets(raw []byte, secrets []string) []string { return testworld.FindSecrets(raw, secrets) }

func TestFindSecretsSeesAPlantedSecret(t *testing.T) {
	raw := []byte(`{"input":"eyJydW5uZXIiOjF9","other":"x"}`)
	if got := findSecrets(raw, []string{"nope", "eyJydW5uZXIiOjF9"}); len(got) != 1 {
		t.Fatalf("found %v, want the planted secret", got)
	}
}

// githubCallReport renders the double's API calls by route and status.
func githubCallReport() string {
	var parts []string
	for k, v := range world.GitHub.Calls() {
		parts = append(parts, fmt.Sprintf("%s %d=%d", k.Route, k.Status, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
