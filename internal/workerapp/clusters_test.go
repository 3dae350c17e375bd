package workerapp

import (
	"testing"

	"k8s.io/client-go/rest"
)

// A worker without named clusters serves the default cluster as it always did (in-cluster
// when nothing names it); one with named clusters serves the default only when told where it is.
func TestServesDefaultCluster(t *testing.T) {
	named := []ClusterConfig{{Name: "gpu", KubeconfigPath: "/kube/gpu"}}
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"nothing configured: in-cluster", Config{}, true},
		{"a kubeconfig", Config{KubeconfigPath: "/kube/default"}, true},
		{"named clusters only", Config{Clusters: named}, false},
		{"named clusters and a kubeconfig", Config{Clusters: named, KubeconfigPath: "/kube/default"}, true},
		{"named clusters and a client configuration", Config{Clusters: named, Kube: &rest.Config{Host: "https://x"}}, true},
	} {
		if got := servesDefaultCluster(tc.cfg); got != tc.want {
			t.Errorf("%s: serves the default cluster = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestValidateClusterConfigs(t *testing.T) {
	for _, tc := range []struct {
		clusters []ClusterConfig
		ok       bool
	}{
		{[]ClusterConfig{{Name: "eu-west"}, {Name: "eu-standby"}}, true},
		{[]ClusterConfig{{Name: "EU_West"}}, false},
		{[]ClusterConfig{{Name: ""}}, false},
		{[]ClusterConfig{{Name: "a"}, {Name: "a"}}, false},
	} {
		if err := validateClusters(tc.clusters); (err == nil) != tc.ok {
			t.Errorf("clusters %+v: error %v, want ok=%v", tc.clusters, err, tc.ok)
		}
	}
}
