package kubewrites

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/localworld/testworld"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path string
		want Path
		ok   bool
	}{
		{"/api/v1/namespaces/ns/pods", Path{Namespace: "ns", Resource: "pods"}, true},
		{"/api/v1/namespaces/ns/pods/p1", Path{Namespace: "ns", Resource: "pods", Name: "p1"}, true},
		{"/api/v1/namespaces/ns/pods/p1/status", Path{Namespace: "ns", Resource: "pods", Name: "p1", Subresource: "status"}, true},
		{"/api/v1/nodes/n1", Path{Resource: "nodes", Name: "n1"}, true},
		{"/api/v1/namespaces/ns", Path{Resource: "namespaces", Name: "ns"}, true},
		{"/api/v1/namespaces", Path{Resource: "namespaces"}, true},
		{"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", Path{Namespace: "ns", Resource: "leases", Name: "l"}, true},
		{"/apis/coordination.k8s.io/v1", Path{}, false},
		{"/healthz", Path{}, false},
		{"/", Path{}, false},
	}
	for _, tc := range tests {
		got, ok := ParsePath(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

// TestCounterCountsWritesOfARealClient drives a client-go clientset through the wrapper
// against a real kube-apiserver: every write is counted once under its verb and resource, the
// created object's name is read from the request body, and reads are not counted.
func TestCounterCountsWritesOfARealClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kubewrites-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	kube, err := testworld.StartKube(ctx, filepath.Join(dir, "kube"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Stop() })

	counter := NewCounter()
	c, err := kubernetes.NewForConfig(counter.Wrap(kube.Config))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"k": "v"}}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Get(ctx, "s1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"a":"b"}}}`)
	if _, err := c.CoreV1().Secrets(ns).Patch(ctx, "s1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Secrets(ns).Delete(ctx, "s1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := map[Key]int{{Create, "secrets"}: 1, {Patch, "secrets"}: 1, {Delete, "secrets"}: 1}
	got := counter.Counts()
	if len(got) != len(want) || counter.Total() != 3 {
		t.Fatalf("counts %v (total %d), want %v", got, counter.Total(), want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d writes, want %d", k, got[k], n)
		}
	}
	for _, w := range counter.Writes() {
		if w.Name != "s1" || w.Namespace != ns || w.Status/100 != 2 || w.At.IsZero() {
			t.Errorf("write %+v: want name s1 in %s, answered 2xx, with a time", w, ns)
		}
	}
	if s := counter.String(); s != "create secrets=1 delete secrets=1 patch secrets=1" {
		t.Errorf("String() = %q", s)
	}
	counter.Reset()
	if counter.Total() != 0 {
		t.Errorf("%d writes after Reset", counter.Total())
	}
}
