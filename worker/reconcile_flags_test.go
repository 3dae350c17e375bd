package main

import (
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// The worker keeps the reconcile Schedule by default, at the policy's interval; the flags change
// its interval and make it a dry run, and 0 leaves the Schedule alone.
func TestReconcileFlags(t *testing.T) {
	cfg, err := parse(t).config(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reconcile == nil || cfg.Reconcile.Interval != workflows.DefaultReconcileInterval || cfg.Reconcile.DryRun {
		t.Errorf("default reconcile %+v, want every %s, not a dry run", cfg.Reconcile, workflows.DefaultReconcileInterval)
	}
	if cfg, err = parse(t, "--reconcile-interval=15m", "--reconcile-dry-run").config(env(nil)); err != nil {
		t.Fatal(err)
	}
	if cfg.Reconcile == nil || cfg.Reconcile.Interval != 15*time.Minute || !cfg.Reconcile.DryRun {
		t.Errorf("reconcile %+v, want every 15m, a dry run", cfg.Reconcile)
	}
	if cfg, err = parse(t, "--reconcile-interval=0").config(env(nil)); err != nil || cfg.Reconcile != nil {
		t.Errorf("--reconcile-interval=0: %+v, %v; want the Schedule left alone", cfg.Reconcile, err)
	}
	if _, err = parse(t, "--reconcile-interval=-1m").config(env(nil)); err == nil {
		t.Error("a negative interval was accepted")
	}
}
