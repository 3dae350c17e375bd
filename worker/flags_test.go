package main

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

func parse(t *testing.T, args ...string) *options {
	t.Helper()
	// The machine's temporal CLI profile must not leak into the tests.
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "missing.toml"))
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestFlagsMakeTheWorkerConfig(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "")
	o := parse(t, "--temporal-address=temporal:7233", "--namespace=ci", "--kubeconfig=/kube/config",
		"--watch-namespace=runnerflow", "--pod-watcher-lease-namespace=leases", "--pod-watcher-lease-name=ci-pod-watcher",
		"--github-url=https://ghe.example.com/api/v3/",
		"--github-points-per-minute=1500", "--metrics-listen=:9191", "--stop-timeout=45s")
	cfg, err := o.config(env(map[string]string{"GITHUB_TOKEN": "ghp_token\n"}))
	if err != nil {
		t.Fatal(err)
	}
	temporal := cfg.TemporalOptions
	if cfg.TemporalAddress != "temporal:7233" || cfg.Namespace != "ci" || temporal.ConnectionOptions.TLS != nil || temporal.Credentials != nil {
		t.Errorf("temporal: %q %q tls %v creds %v", cfg.TemporalAddress, cfg.Namespace, temporal.ConnectionOptions.TLS, temporal.Credentials)
	}
	if cfg.KubeconfigPath != "/kube/config" || cfg.WatchNamespace != "runnerflow" ||
		cfg.PodWatcherLeaseNamespace != "leases" || cfg.PodWatcherLeaseName != "ci-pod-watcher" {
		t.Errorf("kubernetes: %q %q, lease %q/%q", cfg.KubeconfigPath, cfg.WatchNamespace, cfg.PodWatcherLeaseNamespace, cfg.PodWatcherLeaseName)
	}
	if cfg.GitHub.BaseURL != "https://ghe.example.com/api/v3/" || cfg.GitHub.Token != "ghp_token" || cfg.GitHub.AppID != 0 {
		t.Errorf("github: %q token %t app %d", cfg.GitHub.BaseURL, cfg.GitHub.Token == "ghp_token", cfg.GitHub.AppID)
	}
	if cfg.GitHubPointsPerMinute != 1500 || cfg.MetricsListen != ":9191" || cfg.StopTimeout != 45*time.Second || cfg.Logger == nil {
		t.Errorf("budget %d metrics %q stop %s", cfg.GitHubPointsPerMinute, cfg.MetricsListen, cfg.StopTimeout)
	}
}

// An App configuration wins over a token in the environment: a pod that has both mounted
// must not silently act as the token's user.
func TestGitHubAppFlagsTakeTheAppPath(t *testing.T) {
	o := parse(t, "--github-app-id=11", "--github-installation-id=22", "--github-app-key-file=/keys/app.pem")
	cfg, err := o.config(env(map[string]string{"GITHUB_TOKEN": "ghp_token"}))
	if err != nil {
		t.Fatal(err)
	}
	gh := cfg.GitHub
	if gh.AppID != 11 || gh.InstallationID != 22 || gh.PrivateKeyPath != "/keys/app.pem" || gh.Token != "" {
		t.Errorf("github App config: %+v", gh)
	}
}

func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	cfg, err := parse(t).config(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GitHubPointsPerMinute != workflows.DefaultGitHubPointsPerMinute || cfg.MetricsListen != ":9090" || cfg.GitHub.BaseURL != "https://api.github.com/" {
		t.Errorf("defaults: budget %d metrics %q github %q", cfg.GitHubPointsPerMinute, cfg.MetricsListen, cfg.GitHub.BaseURL)
	}
}

func TestTemporalAPIKeyFromTheEnvironment(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "cloud-key")
	cfg, err := parse(t, "--temporal-address=ns.acct.tmprl.cloud:7233").config(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TemporalOptions.Credentials == nil || cfg.TemporalOptions.ConnectionOptions.TLS == nil {
		t.Error("an API key needs credentials and TLS")
	}
}

func TestBadSettingsAreRefused(t *testing.T) {
	for want, args := range map[string][]string{
		"--log-level":                {"--log-level=loud"},
		"--github-points-per-minute": {"--github-points-per-minute=0"},
		"client cert or key":         {"--temporal-tls-cert=/tls/cert.pem"},
		"server CA":                  {"--temporal-tls-ca=/nonexistent/ca.pem"},
	} {
		_, err := parse(t, args...).config(env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want one mentioning %q", args, err, want)
		}
	}
}

func TestKubernetesClientLimitFlags(t *testing.T) {
	cfg, err := parse(t, "--kube-qps=50", "--kube-burst=100").config(env(nil))
	if err != nil || cfg.KubeQPS != 50 || cfg.KubeBurst != 100 {
		t.Errorf("--kube-qps=50 --kube-burst=100: qps %v burst %d, %v", cfg.KubeQPS, cfg.KubeBurst, err)
	}
	if cfg, err := parse(t).config(env(nil)); err != nil || cfg.KubeQPS != 0 || cfg.KubeBurst != 0 {
		t.Errorf("defaults: qps %v burst %d (want 0: the policy default), %v", cfg.KubeQPS, cfg.KubeBurst, err)
	}
	if _, err := parse(t, "--kube-qps=-1").config(env(nil)); err == nil {
		t.Error("a negative --kube-qps was accepted")
	}
}

func TestBuildIDOptsIntoWorkerVersioning(t *testing.T) {
	cfg, err := parse(t).config(env(nil))
	if err != nil || cfg.Deployment.BuildID != "" {
		t.Fatalf("default: %+v, %v; want unversioned", cfg.Deployment, err)
	}
	cfg, err = parse(t, "--build-id=v1.4.0").config(env(nil))
	if err != nil || cfg.Deployment.BuildID != "v1.4.0" || cfg.Deployment.DeploymentName != "runnerflow" {
		t.Errorf("--build-id: %+v, %v; want version runnerflow.v1.4.0", cfg.Deployment, err)
	}
	if _, err := parse(t, "--build-id=v2", "--deployment-name=a.b").config(env(nil)); err == nil {
		t.Error("a deployment name with a dot was accepted")
	}
}

// Profiles are off unless asked for; the sticky cache is the policy's bound unless told.
func TestProfileAndStickyCacheFlags(t *testing.T) {
	cfg, err := parse(t).config(env(nil))
	if err != nil || cfg.PprofListen != "" || cfg.StickyWorkflowCacheSize != workflows.StickyWorkflowCacheSize {
		t.Errorf("defaults: pprof %q, sticky cache %d, %v; want none and %d", cfg.PprofListen, cfg.StickyWorkflowCacheSize, err, workflows.StickyWorkflowCacheSize)
	}
	cfg, err = parse(t, "--pprof-listen=127.0.0.1:6060", "--sticky-workflow-cache-size=250").config(env(nil))
	if err != nil || cfg.PprofListen != "127.0.0.1:6060" || cfg.StickyWorkflowCacheSize != 250 {
		t.Errorf("pprof %q, sticky cache %d, %v", cfg.PprofListen, cfg.StickyWorkflowCacheSize, err)
	}
	// The SDK's cache holds one workflow fewer than its size: 1 would cache nothing.
	if _, err := parse(t, "--sticky-workflow-cache-size=1").config(env(nil)); err == nil || !strings.Contains(err.Error(), "--sticky-workflow-cache-size") {
		t.Errorf("--sticky-workflow-cache-size=1: %v, want it refused", err)
	}
}
