package main

import (
	"flag"
	"io"
	"testing"
)

func TestClusterFlagsNameTheClustersServed(t *testing.T) {
	o := parse(t, "--kubeconfig=/kube/default", "--cluster=gpu=/kube/gpu", "--cluster=standby=")
	cfg, err := o.config(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KubeconfigPath != "/kube/default" || len(cfg.Clusters) != 2 {
		t.Fatalf("default %q, clusters %+v", cfg.KubeconfigPath, cfg.Clusters)
	}
	if c := cfg.Clusters[0]; c.Name != "gpu" || c.KubeconfigPath != "/kube/gpu" {
		t.Errorf("first cluster %+v, want gpu from /kube/gpu", c)
	}
	if c := cfg.Clusters[1]; c.Name != "standby" || c.KubeconfigPath != "" {
		t.Errorf("second cluster %+v, want standby in-cluster", c)
	}
}

func TestClusterFlagRefusesWhatItCannotServe(t *testing.T) {
	for _, args := range [][]string{
		{"--cluster=gpu"},
		{"--cluster==/kube/x"},
		{"--cluster=gpu=/a", "--cluster=gpu=/b"},
	} {
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		defineFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
