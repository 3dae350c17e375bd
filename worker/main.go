// Command worker runs runnerflow's Temporal workers: the runner, pool and scale-window
// workflows, their Kubernetes, GitHub and Temporal activities, the pod watcher, and /metrics.
// Flags are in flags.go; credentials come from the environment (GITHUB_TOKEN,
// TEMPORAL_API_KEY) or files, never from flag values. SIGTERM stops it gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/runnerflow/runnerflow"
	"github.com/runnerflow/runnerflow/internal/workerapp"
)

func main() {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	opts := defineFlags(fs)
	showVersion := fs.Bool("version", false, "print runnerflow's release and exit")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits with usage
	if *showVersion {
		fmt.Println(runnerflow.Version())
		return
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "worker takes no arguments, got %q\n", fs.Args())
		os.Exit(2)
	}
	cfg, err := opts.config(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	// client-go (the pod watcher's informer and its leader election) logs through klog: into
	// the same JSON lines, at the same level.
	klog.SetSlogLogger(cfg.Logger)
	cfg.Metrics = prometheus.NewRegistry()
	cfg.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

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
