package testworld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kube is the cluster shared by the package's tests; each test works in its own namespace.
var kube *Kube

func TestMain(m *testing.M) {
	os.Exit(runWithKube(m))
}

func runWithKube(m *testing.M) int {
	dir, err := os.MkdirTemp("", "testworld-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kube, err = StartKube(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube:", err)
		return 1
	}
	defer kube.Stop()
	return m.Run()
}

func adminClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewNamespaceGivesDistinctDNSSafeNames(t *testing.T) {
	a, b := kube.NewNamespace(t), kube.NewNamespace(t)
	if a == b {
		t.Fatalf("two namespaces with the same name %q", a)
	}
	for _, ns := range []string{a, b} {
		if !strings.HasPrefix(ns, "testnewnamespacegivesdistinctdnssafename") || len(ns) > 63 {
			t.Errorf("namespace %q is not named after the test within 63 characters", ns)
		}
		if _, err := adminClient(t).CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err != nil {
			t.Errorf("get namespace %s: %v", ns, err)
		}
	}
}

func TestNewNamespaceDeletesAtCleanup(t *testing.T) {
	var name string
	t.Run("Inner/with odd_chars", func(t *testing.T) { name = kube.NewNamespace(t) })
	ns, err := adminClient(t).CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted outright.
	case err != nil:
		t.Fatal(err)
	case ns.DeletionTimestamp == nil:
		t.Fatalf("namespace %s still exists without a deletion timestamp after its test ended", name)
	}
}

func TestPodAndSecretRoundTrip(t *testing.T) {
	ns := kube.NewNamespace(t)
	c := adminClient(t)
	ctx := t.Context()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"token": "s3cret"},
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gotSecret, err := c.CoreV1().Secrets(ns).Get(ctx, "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(gotSecret.Data["token"]) != "s3cret" {
		t.Errorf("secret data = %q, want the value written", gotSecret.Data["token"])
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gotPod, err := c.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing schedules or runs pods in this cluster: the pod waits for a simulated kubelet.
	if gotPod.Status.Phase != corev1.PodPending || gotPod.Spec.NodeName != "" {
		t.Errorf("pod phase %q on node %q, want Pending and unbound", gotPod.Status.Phase, gotPod.Spec.NodeName)
	}
}

func TestRBACIsEnforced(t *testing.T) {
	ns := kube.NewNamespace(t)
	ctx := t.Context()
	user, err := kubernetes.NewForConfig(kube.ImpersonatingConfig("alice", "runnerflow-testers"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = user.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing pods without a Role: err = %v, want Forbidden", err)
	}
	grantPodReader(t, ns, "alice")
	// RBAC decisions follow the API server's informer of Roles; allow it a moment to see the
	// new binding rather than asserting on timing.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := user.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("listing pods with a Role never succeeded: %v", err)
	}
	if _, err := user.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets with a pod-only Role: err = %v, want Forbidden", err)
	}
}

func grantPodReader(t *testing.T, ns, user string) {
	t.Helper()
	c := adminClient(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
	if _, err := c.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestKubeconfigFileWorks(t *testing.T) {
	// The file is for processes a test starts; load it the way they would.
	cfg, err := clientcmd.BuildConfigFromFlags("", kube.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" {
		t.Errorf("server version %+v, want major 1", v)
	}
}

func TestStartStopSecondCluster(t *testing.T) {
	k, err := StartKube(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := k.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	for _, p := range k.procs {
		if !p.hasExited() {
			t.Errorf("%s still running after Stop", p.name)
		}
		// Signal 0 probes whether the process still exists.
		if err := syscall.Kill(p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after Stop", p.name, p.cmd.Process.Pid)
		}
	}
}

func TestToolPathRefusesPathsAndExplainsMissingTools(t *testing.T) {
	if _, err := ToolPath("../go.mod"); err == nil {
		t.Error("ToolPath accepted a path")
	}
	_, err := ToolPath("no-such-tool")
	if err == nil || !strings.Contains(err.Error(), "scripts/tools.sh") {
		t.Errorf("missing tool: err = %v, want a hint to run scripts/tools.sh", err)
	}
}
