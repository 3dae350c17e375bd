package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/deploy"
)

// serviceAccountClient acts as the named ServiceAccount of the runnerflow namespace.
func serviceAccountClient(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	return serviceAccountClientIn(t, deploy.Namespace, name)
}

// serviceAccountClientIn acts as the named ServiceAccount of ns, with the groups the API
// server gives every ServiceAccount token.
func serviceAccountClientIn(t *testing.T, ns, name string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(serviceAccountConfig(t, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func serviceAccountConfig(t *testing.T, ns, name string) *rest.Config {
	t.Helper()
	return startKube(t).ImpersonatingConfig("system:serviceaccount:"+ns+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+ns)
}

// grants lists what a client may do in ns as "group/resource verb" (core group written as
// ""), beyond what every authenticated identity may do anyway: the baseline is measured on a
// ServiceAccount of ns that nothing is bound to.
func grants(t *testing.T, c kubernetes.Interface, ns string) []string {
	t.Helper()
	baseline := rulesOf(t, serviceAccountClientIn(t, ns, "nothing-is-bound-to-this-account"), ns)
	var out []string
	for _, r := range rulesOf(t, c, ns) {
		if !slices.Contains(baseline, r) {
			out = append(out, r)
		}
	}
	return out
}

func rulesOf(t *testing.T, c kubernetes.Interface, ns string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	review, err := c.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authv1.SelfSubjectRulesReview{Spec: authv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("rules review in %s: %v", ns, err)
	}
	if review.Status.Incomplete {
		t.Fatalf("rules review in %s is incomplete: %s", ns, review.Status.EvaluationError)
	}
	var out []string
	for _, r := range review.Status.ResourceRules {
		if len(r.ResourceNames) > 0 {
			t.Errorf("rule limited to names %v: not expected from runnerflow's Role", r.ResourceNames)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%s/%s %s", g, res, v))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Whatever the worker's Role grants in its own namespace, it grants nothing in any other.
func TestWorkerMayDoNothingOutsideItsNamespace(t *testing.T) {
	applyBase(t)
	worker := serviceAccountClient(t, deploy.WorkerServiceAccount)
	if got := grants(t, worker, deploy.Namespace); len(got) == 0 {
		t.Fatalf("the worker may do nothing in %s: the Role is not bound", deploy.Namespace)
	}
	other := startKube(t).NewNamespace(t)
	if got := grants(t, worker, other); len(got) > 0 {
		t.Errorf("in namespace %s the worker may %v; want nothing beyond its own namespace", other, got)
	}
}

// The runners' ServiceAccount may do nothing, in the runner namespace or in the warm one: a
// job's pod that got its token could not read a credential in either.
func TestRunnerServiceAccountMayDoNothing(t *testing.T) {
	applyBase(t)
	runner := serviceAccountClient(t, deploy.RunnerServiceAccount)
	for _, ns := range []string{deploy.Namespace, deploy.WarmNamespace} {
		if got := grants(t, runner, ns); len(got) > 0 {
			t.Errorf("the runners' ServiceAccount may %v in %s; want nothing", got, ns)
		}
	}
}

func TestStarterHasNoKubernetesRights(t *testing.T) {
	applyBase(t)
	starter := serviceAccountClient(t, deploy.StarterServiceAccount)
	if got := grants(t, starter, deploy.Namespace); len(got) > 0 {
		t.Errorf("the starter may %v in %s; want nothing", got, deploy.Namespace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := starter.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "starter lists pods", err)
	_, err = starter.CoreV1().Secrets(deploy.Namespace).Get(ctx, "runnerflow-github", metav1.GetOptions{})
	expectForbidden(t, "starter reads the GitHub secret", err)
}

func expectForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: got %v, want Forbidden", what, err)
	}
}

// Real requests the worker must be refused: anything outside its namespace, anything
// cluster-scoped, and the verbs its Role leaves out inside the namespace.
func TestWorkerIsRefusedEverythingElse(t *testing.T) {
	applyBase(t)
	w := serviceAccountClient(t, deploy.WorkerServiceAccount)
	other := startKube(t).NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	_, err := w.CoreV1().Pods(other).Create(ctx, pod, metav1.CreateOptions{})
	expectForbidden(t, "create a pod in another namespace", err)
	_, err = w.CoreV1().Secrets(other).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	expectForbidden(t, "create a secret in another namespace", err)
	_, err = w.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list pods in all namespaces", err)
	_, err = w.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list nodes", err)
	_, err = w.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "worker-made"}}, metav1.CreateOptions{})
	expectForbidden(t, "create a namespace", err)
	_, err = w.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list persistent volumes", err)
	_, err = w.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list cluster roles", err)
	_, err = w.CoreV1().Secrets(other).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list secrets in another namespace (reconcile lists its own namespace's)", err)
	_, err = w.CoreV1().ConfigMaps(deploy.Namespace).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list config maps", err)
	_, err = w.AppsV1().Deployments(deploy.Namespace).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list deployments", err)
	_, err = w.CoreV1().Pods(deploy.Namespace).Patch(ctx, "any", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	expectForbidden(t, "patch a pod", err)
	_, err = w.CoreV1().PersistentVolumeClaims(deploy.Namespace).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list claims (slot claims are read by name)", err)
	expectForbidden(t, "delete a claim (slot claims outlive their runners)",
		w.CoreV1().PersistentVolumeClaims(deploy.Namespace).Delete(ctx, "any", metav1.DeleteOptions{}))
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}, EventTime: metav1.NowMicro(), ReportingController: "runnerflow.dev/worker",
		ReportingInstance: "worker-0", Action: "Start", Reason: "Started", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: deploy.Namespace, Name: "any"}}
	_, err = w.EventsV1().Events(deploy.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	expectForbidden(t, "create an event (the worker records none)", err)
	for _, ra := range []authv1.ResourceAttributes{
		{Namespace: deploy.Namespace, Verb: "create", Resource: "pods", Subresource: "exec"},
		{Namespace: deploy.Namespace, Verb: "get", Resource: "pods", Subresource: "log"},
		{Namespace: deploy.Namespace, Verb: "update", Resource: "pods", Subresource: "status"},
		{Namespace: deploy.Namespace, Verb: "create", Resource: "serviceaccounts", Subresource: "token"},
		{Namespace: deploy.Namespace, Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Namespace: deploy.Namespace, Verb: "deletecollection", Resource: "pods"},
		{Namespace: deploy.Namespace, Verb: "watch", Resource: "secrets"},
	} {
		if allowed(t, w, ra) {
			t.Errorf("the worker may %s %s/%s; its Role does not grant it", ra.Verb, ra.Resource, ra.Subresource)
		}
	}
}

func allowed(t *testing.T, c kubernetes.Interface, ra authv1.ResourceAttributes) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	review, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("access review %+v: %v", ra, err)
	}
	return review.Status.Allowed
}
