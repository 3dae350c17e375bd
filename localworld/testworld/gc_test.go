package testworld

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runnerflow/runnerflow/localworld/kubewrites"
)

// TestGarbageCollectorAndAuditedWrites starts a cluster with two identities of their own and
// an audit log of their writes, and the garbage collector: a Secret owned by a deleted pod
// goes, as in a real cluster, and the audit log names who wrote what (the test's creates and
// delete, the collector's delete of the Secret), with the created object's name. The audit
// log counts a client's writes as the counting transport (localworld/kubewrites) does, refused
// ones included, so the benchmark can count a peer's writes from the log and runnerflow's from
// the transport.
func TestGarbageCollectorAndAuditedWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tester = "tester"
	k, err := StartKubeWith(ctx, KubeOptions{Dir: t.TempDir(), Users: []string{tester, GarbageCollectorUser}, AuditWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	if err := k.StartGarbageCollector(ctx); err != nil {
		t.Fatal(err)
	}
	path, err := k.KubeconfigFor(tester)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	counter := kubewrites.NewCounter()
	c := kubernetes.NewForConfigOrDie(counter.Wrap(cfg))
	pod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}}
	if _, err := c.CoreV1().Secrets("default").Create(ctx, owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets("default").Create(ctx, owned, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create of the Secret: %v, want AlreadyExists", err)
	}
	// No kubelet runs: a pod never bound to a node is deleted at once.
	if err := c.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := c.CoreV1().Secrets("default").Get(ctx, owned.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Secret owned by a deleted pod is still there: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	writes, err := k.AuditedWrites()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	audited := map[string]int{}
	for _, w := range writes {
		if w.Code/100 == 2 && w.Namespace == "default" && !w.At.IsZero() {
			got[w.User+" "+w.Key()+" "+w.Name] = true
		}
		if w.User == tester {
			audited[w.Key()]++
		}
	}
	counted := map[string]int{}
	for k, n := range counter.Counts() {
		counted[k.String()] = n
	}
	if !maps.Equal(audited, counted) || audited["create secrets"] != 2 {
		t.Errorf("the tester's writes: audit log %v, counting transport %v; want the same, the refused create included", audited, counted)
	}
	for _, want := range []string{
		"tester create pods owner", "tester create secrets owned", "tester delete pods owner",
		GarbageCollectorUser + " delete secrets owned",
	} {
		if !got[want] {
			t.Errorf("audit log lacks %q; it has %v", want, got)
		}
	}
}
