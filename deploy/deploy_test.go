package deploy_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/runnerflow/runnerflow/deploy"
)

func renderBase(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := deploy.Base()
	if err != nil {
		t.Fatalf("render the base: %v", err)
	}
	return objs
}

// typed converts the one object of kind/name in objs into out, failing if there is none.
func typed(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("the base has no %s %s", kind, name)
}

func TestBaseHoldsOnlyNamespacedRunnerflowObjects(t *testing.T) {
	objs := renderBase(t)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
		switch o.GetKind() {
		case "Namespace":
			if o.GetName() != deploy.Namespace && o.GetName() != deploy.WarmNamespace {
				t.Errorf("the base creates namespace %q; only %q and %q are expected", o.GetName(), deploy.Namespace, deploy.WarmNamespace)
			}
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("%s %s: runnerflow needs no cluster-wide rights", o.GetKind(), o.GetName())
		default:
			want := deploy.Namespace
			if o.GetName() == deploy.WarmRole {
				want = deploy.WarmNamespace
			}
			if o.GetNamespace() != want {
				t.Errorf("%s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), want)
			}
		}
		if o.GetLabels()["app.kubernetes.io/part-of"] != "runnerflow" {
			t.Errorf("%s %s lacks the app.kubernetes.io/part-of=runnerflow label", o.GetKind(), o.GetName())
		}
	}
	want := []string{
		"Namespace/runnerflow", "Namespace/runnerflow-warm",
		"ServiceAccount/runnerflow-worker", "ServiceAccount/runnerflow-starter", "ServiceAccount/runnerflow-runner",
		"Role/runnerflow-worker", "RoleBinding/runnerflow-worker", "Role/runnerflow-worker-warm", "RoleBinding/runnerflow-worker-warm",
		"Deployment/runnerflow-worker", "Deployment/runnerflow-starter",
		"Service/runnerflow-webhook", "Service/runnerflow-metrics",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the base renders\n  %v\nwant\n  %v", got, want)
	}
}

// The worker's two Roles, in the runner namespace and in the warm one, grant the verbs listed
// here (rbac_activities_test.go proves they are what the code uses), each bound to the worker
// alone.
func TestWorkerRoleListsOnlyTheNeededVerbs(t *testing.T) {
	checkRole(t, deploy.WorkerServiceAccount, deploy.Namespace, map[string][]string{
		"/pods":                      {"create", "delete", "get", "list", "watch"},
		"/secrets":                   {"create", "delete", "get", "list", "patch", "update"},
		"/persistentvolumeclaims":    {"create", "get"},
		"coordination.k8s.io/leases": {"create", "get", "update"},
	})
	checkRole(t, deploy.WarmRole, deploy.WarmNamespace, map[string][]string{
		"/secrets": {"create", "delete", "deletecollection", "get", "list", "update", "watch"},
	})
}

func checkRole(t *testing.T, name, ns string, want map[string][]string) {
	t.Helper()
	var role rbacv1.Role
	typed(t, renderBase(t), "Role", name, &role)
	if role.Namespace != ns {
		t.Errorf("Role %s is in %q, want %q", name, role.Namespace, ns)
	}
	got := map[string][]string{}
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %v: resourceNames and nonResourceURLs are not expected", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := g + "/" + res
				got[key] = append(got[key], r.Verbs...)
			}
		}
	}
	for key, verbs := range got {
		slices.Sort(verbs)
		if !slices.Equal(verbs, want[key]) {
			t.Errorf("Role grants %v on %q, want %v", verbs, key, want[key])
		}
	}
	for key := range want {
		if _, ok := got[key]; !ok {
			t.Errorf("Role grants nothing on %q", key)
		}
	}
	var binding rbacv1.RoleBinding
	typed(t, renderBase(t), "RoleBinding", name, &binding)
	wantSubject := rbacv1.Subject{Kind: "ServiceAccount", Name: deploy.WorkerServiceAccount, Namespace: deploy.Namespace}
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name || !slices.Equal(binding.Subjects, []rbacv1.Subject{wantSubject}) {
		t.Errorf("RoleBinding %s binds %v to %v, want the worker's Role to %v only", name, binding.RoleRef, binding.Subjects, wantSubject)
	}
}

func TestDeploymentsRunLockedDown(t *testing.T) {
	objs := renderBase(t)
	for _, tc := range []struct{ name, sa string }{
		{"runnerflow-worker", deploy.WorkerServiceAccount},
		{"runnerflow-starter", deploy.StarterServiceAccount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d appsv1.Deployment
			typed(t, objs, "Deployment", tc.name, &d)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("replicas %v, want 2", d.Spec.Replicas)
			}
			pod := d.Spec.Template.Spec
			if pod.ServiceAccountName != tc.sa {
				t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, tc.sa)
			}
			checkPodSecurity(t, pod)
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			checkContainer(t, pod.Containers[0])
		})
	}
	var starter appsv1.Deployment
	typed(t, objs, "Deployment", "runnerflow-starter", &starter)
	if a := starter.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the starter needs no Kubernetes access and must not mount a ServiceAccount token")
	}
}

func checkPodSecurity(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot must be true")
	}
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("pod securityContext.runAsUser must be a non-zero uid")
	}
	if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext.seccompProfile must be RuntimeDefault")
	}
}

func checkContainer(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Error("capabilities must drop ALL and add none")
	}
	if sc != nil && sc.Privileged != nil && *sc.Privileged {
		t.Error("the container must not be privileged")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("no memory limit")
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("want an HTTP probe on %s, got %+v", want, probe)
			continue
		}
		if !hasPort(c, probe.HTTPGet.Port.String()) {
			t.Errorf("probe on %s uses port %s, which the container does not declare", want, probe.HTTPGet.Port.String())
		}
	}
	if !hasPort(c, "metrics") {
		t.Error("the container declares no port named metrics (the metrics Service selects it by name)")
	}
}

func hasPort(c corev1.Container, nameOrNumber string) bool {
	for _, p := range c.Ports {
		if p.Name == nameOrNumber || nameOrNumber == strconv.Itoa(int(p.ContainerPort)) {
			return true
		}
	}
	return false
}

func TestBaseAppliesToTheAPIServer(t *testing.T) {
	applied := applyBase(t)
	objs := renderBase(t)
	if len(applied) != len(objs) {
		t.Fatalf("applied %d objects, rendered %d", len(applied), len(objs))
	}
	for i, o := range applied {
		if o.GetUID() == "" || o.GetName() != objs[i].GetName() || o.GetKind() != objs[i].GetKind() {
			t.Errorf("object %d: the API server returned %s %s (uid %q) for %s %s", i, o.GetKind(), o.GetName(), o.GetUID(), objs[i].GetKind(), objs[i].GetName())
		}
	}
	// A second apply of the same manifests changes nothing: no field is defaulted differently
	// from what the manifests say in a way that makes apply fight the server.
	a, err := deploy.NewApplier(startKube(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	again, err := a.Apply(ctx, objs, deploy.ApplyOptions{})
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	for i, o := range again {
		if o.GetResourceVersion() != applied[i].GetResourceVersion() {
			t.Errorf("%s %s changed on a second apply (resourceVersion %s -> %s)", o.GetKind(), o.GetName(), applied[i].GetResourceVersion(), o.GetResourceVersion())
		}
	}
}

func TestExampleSecretsApplyAndMatchTheDeployments(t *testing.T) {
	applyBase(t)
	data, err := os.ReadFile("secrets.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := decode(data)
	if err != nil {
		t.Fatal(err)
	}
	a, err := deploy.NewApplier(startKube(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := a.Apply(ctx, secrets, deploy.ApplyOptions{DryRun: true}); err != nil {
		t.Fatalf("the example secrets do not apply: %v", err)
	}
	keys := map[string][]string{}
	for _, s := range secrets {
		var sec corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.Object, &sec); err != nil {
			t.Fatal(err)
		}
		for k := range sec.StringData {
			keys[sec.Name] = append(keys[sec.Name], k)
		}
	}
	for _, ref := range secretRefs(t, renderBase(t)) {
		if ref.key != "" && !slices.Contains(keys[ref.secret], ref.key) {
			t.Errorf("%s uses key %q of Secret %s, which secrets.example.yaml does not show", ref.user, ref.key, ref.secret)
		} else if _, ok := keys[ref.secret]; !ok {
			t.Errorf("%s uses Secret %s, which secrets.example.yaml does not show", ref.user, ref.secret)
		}
	}
}

type secretRef struct{ user, secret, key string }

// secretRefs lists every Secret (and key) the base's Deployments read, through volumes or env.
func secretRefs(t *testing.T, objs []*unstructured.Unstructured) []secretRef {
	t.Helper()
	var refs []secretRef
	for _, name := range []string{"runnerflow-worker", "runnerflow-starter"} {
		var d appsv1.Deployment
		typed(t, objs, "Deployment", name, &d)
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			refs = append(refs, secretRef{user: name, secret: v.Secret.SecretName})
			for _, item := range v.Secret.Items {
				refs = append(refs, secretRef{user: name, secret: v.Secret.SecretName, key: item.Key})
			}
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					refs = append(refs, secretRef{user: name, secret: e.ValueFrom.SecretKeyRef.Name, key: e.ValueFrom.SecretKeyRef.Key})
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					refs = append(refs, secretRef{user: name, secret: ef.SecretRef.Name})
				}
			}
		}
	}
	return refs
}

// Render is kustomize itself: fields the base does not use today (a namespace, labels) act as
// kustomize defines them, and what kustomize refuses is refused.
func TestRenderIsKustomize(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n"
	objs, err := deploy.Render(fstest.MapFS{
		"kustomization.yaml": {Data: []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
			"namespace: other\nlabels: [{pairs: {team: ci}}]\nresources: [a.yaml, sub]\n")},
		"a.yaml":                 {Data: []byte(cm)},
		"sub/kustomization.yaml": {Data: []byte("resources: [ns.yaml]\n")},
		"sub/ns.yaml":            {Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()+"/"+o.GetLabels()["team"])
	}
	// Legacy order puts the Namespace first, as `kustomize build` does.
	if want := []string{"Namespace//other/ci", "ConfigMap/other/a/ci"}; !slices.Equal(got, want) {
		t.Errorf("rendered %v, want %v", got, want)
	}
	for name, files := range map[string]fstest.MapFS{
		"a resource outside the kustomization": {
			"kustomization.yaml": {Data: []byte("resources: [../a.yaml]\n")},
		},
		"a missing resource": {
			"kustomization.yaml": {Data: []byte("resources: [a.yaml]\n")},
		},
		"no kustomization": {
			"a.yaml": {Data: []byte(cm)},
		},
		"an unknown kustomization field": {
			"kustomization.yaml": {Data: []byte("resources: [a.yaml]\nnotAField: 1\n")},
			"a.yaml":             {Data: []byte(cm)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if objs, err := deploy.Render(files); err == nil {
				t.Errorf("rendered %d objects, want an error", len(objs))
			}
		})
	}
}

func TestApplyRefusesAnObjectTheServerRejects(t *testing.T) {
	k := startKube(t)
	ns := k.NewNamespace(t)
	bad, err := decode([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: " + ns + "}\ndata: {k: v}\nunknownField: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := deploy.NewApplier(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Apply(ctx, bad, deploy.ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "unknownField") {
		t.Errorf("apply of an object with an unknown field: %v, want the server's strict-validation error naming it", err)
	}
	// The same object without the bad field is stored: the check above failed for the field.
	delete(bad[0].Object, "unknownField")
	if _, err := a.Apply(ctx, bad, deploy.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(k.Config)
	got, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "data", "k"); v != "v" {
		t.Errorf("the applied ConfigMap holds data.k=%q, want v", v)
	}
}
