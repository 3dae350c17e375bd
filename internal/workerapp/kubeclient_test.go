package workerapp

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/workflows"
)

// The Kubernetes client's rate limit is the policy's unless KubeQPS/KubeBurst say otherwise, and
// the caller's configuration is never modified.
func TestKubeClientRateLimit(t *testing.T) {
	for _, tc := range []struct {
		qps  float32
		want float32
	}{{0, workflows.DefaultKubernetesQPS}, {20, 20}} {
		given := &rest.Config{Host: "https://127.0.0.1:1"}
		c, err := kubeClient(Config{Kube: given, KubeQPS: tc.qps, KubeBurst: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := c.(*kubernetes.Clientset).CoreV1().RESTClient().GetRateLimiter().QPS()
		if got != tc.want || given.QPS != 0 || given.Burst != 0 {
			t.Errorf("KubeQPS %v: client QPS %v, want %v; caller's config now %v/%d", tc.qps, got, tc.want, given.QPS, given.Burst)
		}
	}
}
