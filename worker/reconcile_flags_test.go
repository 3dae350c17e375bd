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

// The hook whose failed deliveries are redelivered: the App's own by default with an App, none
// by default with a token, or the one --reconcile-hook names.
func TestReconcileHookFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want workflows.HookRef
		bad  bool
	}{
		{args: nil, want: workflows.HookRef{}},
		{args: []string{"--github-app-id=1", "--github-installation-id=2", "--github-app-key-file=k.pem"}, want: workflows.HookRef{App: true}},
		{args: []string{"--github-app-id=1", "--github-installation-id=2", "--github-app-key-file=k.pem", "--reconcile-hook=none"}, want: workflows.HookRef{}},
		{args: []string{"--reconcile-hook=org:acme/12"}, want: workflows.HookRef{Organization: "acme", ID: 12}},
		{args: []string{"--reconcile-hook=repo:acme/app/7"}, want: workflows.HookRef{Repository: "acme/app", ID: 7}},
		{args: []string{"--reconcile-hook=app"}, bad: true}, // a token cannot read the App's hook
		{args: []string{"--reconcile-hook=org:acme"}, bad: true},
	} {
		cfg, err := parse(t, tc.args...).config(env(nil))
		if tc.bad {
			if err == nil {
				t.Errorf("%v accepted", tc.args)
			}
			continue
		}
		if err != nil || cfg.Reconcile == nil || cfg.Reconcile.Hook != tc.want {
			t.Errorf("%v: %+v, %v; want hook %+v", tc.args, cfg.Reconcile, err, tc.want)
		}
	}
}
