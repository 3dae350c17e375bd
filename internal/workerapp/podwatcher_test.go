package workerapp

import (
	"os"
	"path/filepath"
	"testing"
)

// The pod watcher's Lease sits where it is told, else beside the pods it watches (where the
// worker's namespaced Role is), else in the Kubernetes configuration's namespace.
func TestPodWatcherLeaseNamespace(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ci-runners}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"configured", Config{PodWatcherLeaseNamespace: "leases", WatchNamespace: "runners", KubeconfigPath: kubeconfig}, "leases"},
		{"the watched namespace", Config{WatchNamespace: "runners", KubeconfigPath: kubeconfig}, "runners"},
		{"the kubeconfig context's", Config{KubeconfigPath: kubeconfig}, "ci-runners"},
		{"default when nothing says", Config{}, "default"},
	} {
		if got := podWatcherLeaseNamespace(tc.cfg, tc.cfg.KubeconfigPath); got != tc.want {
			t.Errorf("%s: Lease namespace %q, want %q", tc.name, got, tc.want)
		}
	}
}
