package deploy_test

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// The runners' ServiceAccount, in the base and in the chart's defaults, is what
// docs/security.md says it is: bound to no Role or ClusterRole and mounting no token; and no
// NetworkPolicy is installed unless asked for.
func TestRunnerServiceAccountIsBoundToNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []*unstructured.Unstructured
	}{
		{"kustomize", renderBase(t)},
		{"helm", mustRenderChart(t, "runnerflow", deploy.Namespace, "").all()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sa corev1.ServiceAccount
			typed(t, tc.objs, "ServiceAccount", deploy.RunnerServiceAccount, &sa)
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Errorf("ServiceAccount %s mounts a token in its pods; want automountServiceAccountToken: false", sa.Name)
			}
			for _, o := range tc.objs {
				switch o.GetKind() {
				case "RoleBinding", "ClusterRoleBinding":
					var b rbacv1.RoleBinding
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
						t.Fatal(err)
					}
					for _, s := range b.Subjects {
						if s.Kind == rbacv1.ServiceAccountKind && s.Name == deploy.RunnerServiceAccount {
							t.Errorf("%s %s binds %s to %v; the runners' ServiceAccount must have no role", o.GetKind(), o.GetName(), s.Name, b.RoleRef)
						}
					}
				case "NetworkPolicy":
					t.Errorf("NetworkPolicy %s is installed by default; it must be asked for (runners.networkPolicy.enabled)", o.GetName())
				}
			}
		})
	}
}

// The chart's NetworkPolicy, when asked for, is the example the kustomize users apply, and it
// selects the pods runnerflow makes for runners: those carry its managed-by label.
func TestRunnerNetworkPolicyIsTheExample(t *testing.T) {
	chart := mustRenderChart(t, "runnerflow", deploy.Namespace, "runners: {networkPolicy: {enabled: true}}")
	var rendered *unstructured.Unstructured
	for _, o := range chart.objects {
		if o.GetKind() == "NetworkPolicy" {
			rendered = o
		}
	}
	if rendered == nil {
		t.Fatal("runners.networkPolicy.enabled renders no NetworkPolicy")
	}
	data, err := os.ReadFile("examples/runner-networkpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example, err := decode(data)
	if err != nil || len(example) != 1 {
		t.Fatalf("examples/runner-networkpolicy.yaml: %d objects, %v", len(example), err)
	}
	if d := diff("NetworkPolicy", withoutHelmLabels(t, rendered), withoutHelmLabels(t, example[0])); len(d) > 0 {
		t.Errorf("chart vs example:\n  %s", strings.Join(d, "\n  "))
	}
	for _, o := range []*unstructured.Unstructured{rendered, example[0]} {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "podSelector", "matchLabels")
		if want := map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue}; !maps.Equal(sel, want) {
			t.Errorf("the NetworkPolicy selects %v, want runnerflow's runner pods %v", sel, want)
		}
		types, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "policyTypes")
		if !slices.Equal(types, []string{"Ingress", "Egress"}) {
			t.Errorf("policyTypes %v, want Ingress and Egress", types)
		}
	}
}

// docs/security.md names the settings the defaults ship, so a change to one fails here until
// the page follows.
func TestSecurityPageNamesTheShippedDefaults(t *testing.T) {
	page, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		deploy.RunnerServiceAccount, "automountServiceAccountToken: false", "runners.networkPolicy.enabled",
		"examples/runner-networkpolicy.yaml", "--warm-namespace", "deletecollection",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("docs/security.md does not mention %q", want)
		}
	}
	for _, doc := range []string{"../docs/operations.md", "../README.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "security.md") {
			t.Errorf("%s does not link docs/security.md", doc)
		}
	}
}
