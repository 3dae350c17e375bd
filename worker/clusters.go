package main

import (
	"fmt"
	"strings"

	"github.com/runnerflow/runnerflow/internal/workerapp"
)

// clusterFlags is the repeated --cluster NAME=KUBECONFIG: the named clusters this worker
// serves. An empty KUBECONFIG (NAME=) is the in-cluster configuration, for a worker deployed in
// the cluster it serves.
type clusterFlags []workerapp.ClusterConfig

func (c *clusterFlags) String() string {
	var parts []string
	for _, cl := range *c {
		parts = append(parts, cl.Name+"="+cl.KubeconfigPath)
	}
	return strings.Join(parts, ",")
}

func (c *clusterFlags) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=KUBECONFIG (NAME= for the in-cluster configuration), got %q", v)
	}
	for _, cl := range *c {
		if cl.Name == name {
			return fmt.Errorf("cluster %q given twice", name)
		}
	}
	*c = append(*c, workerapp.ClusterConfig{Name: name, KubeconfigPath: path})
	return nil
}
