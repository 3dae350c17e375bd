package deploy_test

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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

// Warm registrations wait apart from the runners in the base and in the chart's defaults: the
// worker is told a warm namespace (--warm-namespace) other than the one it runs runners in
// (--watch-namespace), it has a Role there bound to it alone, and nothing binds the runners'
// ServiceAccount in either namespace (TestRunnerServiceAccountIsBoundToNothing looks at every
// binding rendered; TestRunnerServiceAccountMayDoNothing asks the API server).
func TestWarmRegistrationsWaitApartFromTheRunners(t *testing.T) {
	for _, tc := range []struct {
		name, workerSA, warmRole string
		objs                     []*unstructured.Unstructured
	}{
		{"kustomize", deploy.WorkerServiceAccount, deploy.WarmRole, renderBase(t)},
		{"helm", "runnerflow-worker", "runnerflow-worker-warm", mustRenderChart(t, "runnerflow", deploy.Namespace, "").all()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := workerFlags(t, tc.objs)
			warm, runners := args["--warm-namespace"], args["--watch-namespace"]
			if warm == "" || runners == "" || warm == runners {
				t.Fatalf("the worker runs runners in %q and keeps warm registrations in %q; want two namespaces", runners, warm)
			}
			var binding rbacv1.RoleBinding
			typed(t, tc.objs, "RoleBinding", tc.warmRole, &binding)
			want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tc.workerSA, Namespace: runners}}
			if binding.Namespace != warm || binding.RoleRef.Name != tc.warmRole || !slices.Equal(binding.Subjects, want) {
				t.Errorf("RoleBinding %s/%s binds %v to %v; want the worker's warm Role in %s to %v", binding.Namespace, binding.Name,
					binding.RoleRef, binding.Subjects, warm, want)
			}
			var ns corev1.Namespace
			typed(t, tc.objs, "Namespace", warm, &ns)
		})
	}
}

// The chart takes a warm namespace it is given, made by someone else, and refuses the release's
// own.
func TestChartWarmNamespaceValues(t *testing.T) {
	objs := mustRenderChart(t, "runnerflow", deploy.Namespace, "warm: {namespace: ci-credentials, createNamespace: false}").all()
	if got := workerFlags(t, objs)["--warm-namespace"]; got != "ci-credentials" {
		t.Errorf("--warm-namespace=%s, want ci-credentials", got)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			t.Errorf("warm.createNamespace: false renders Namespace %s", o.GetName())
		}
	}
	var role rbacv1.Role
	typed(t, objs, "Role", "runnerflow-worker-warm", &role)
	if role.Namespace != "ci-credentials" {
		t.Errorf("the worker's warm Role is in %q, want ci-credentials", role.Namespace)
	}
	_, err := renderChart("runnerflow", deploy.Namespace, "warm: {namespace: "+deploy.Namespace+"}")
	if err == nil || !strings.Contains(err.Error(), "warm.namespace") {
		t.Errorf("warm.namespace set to the release's namespace: %v; want it refused", err)
	}
}

// workerFlags are the worker Deployment's --name=value arguments.
func workerFlags(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	var d appsv1.Deployment
	typed(t, objs, "Deployment", "runnerflow-worker", &d)
	out := map[string]string{}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		name, value, _ := strings.Cut(a, "=")
		out[name] = value
	}
	return out
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
