// Command worker runs runnerflow's Temporal workers: the runner, pool and scale-window
// workflows, their Kubernetes, GitHub and Temporal activities, and the pod watcher.
// Credentials come from the environment (GITHUB_TOKEN) or a GitHub App key file, never from
// flags.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/runnerflow/runnerflow/internal/workerapp"
)

func main() {
	var cfg workerapp.Config
	flag.StringVar(&cfg.TemporalAddress, "temporal-address", env("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port")
	flag.StringVar(&cfg.Namespace, "namespace", env("TEMPORAL_NAMESPACE", "default"), "Temporal namespace")
	flag.StringVar(&cfg.KubeconfigPath, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster")
	flag.StringVar(&cfg.WatchNamespace, "watch-namespace", "", "watch runner pods in this namespace only; empty means all")
	flag.StringVar(&cfg.GitHub.BaseURL, "github-url", env("GITHUB_URL", "https://api.github.com/"), "GitHub REST API base URL")
	flag.Int64Var(&cfg.GitHub.AppID, "github-app-id", 0, "GitHub App id (instead of GITHUB_TOKEN)")
	flag.Int64Var(&cfg.GitHub.InstallationID, "github-installation-id", 0, "GitHub App installation id")
	flag.StringVar(&cfg.GitHub.PrivateKeyPath, "github-app-key-file", "", "GitHub App private key (PEM file)")
	flag.IntVar(&cfg.GitHubRequestsPerHour, "github-requests-per-hour", 5000, "GitHub API budget of the credential")
	flag.Parse()
	cfg.GitHub.Token = os.Getenv("GITHUB_TOKEN")
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app, err := workerapp.New(cfg)
	if err == nil {
		err = app.Run(ctx)
	}
	if err != nil {
		cfg.Logger.Error("Worker failed", "error", err)
		os.Exit(1)
	}
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
