// Command demo runs runnerflow on this machine: the test world (Temporal dev server with its
// Web UI, a real kube-apiserver, the GitHub double, the runner simulator), the worker and the
// starter's webhook intake, two example pools and a burst of jobs; it prints progress and the
// measured latencies, then keeps the UI up until Ctrl-C. The logic is in localworld/demo.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/runnerflow/runnerflow/localworld/demo"
)

func main() {
	var opts demo.Options
	flag.IntVar(&opts.Jobs, "jobs", 20, "how many jobs the GitHub double queues at once")
	flag.BoolVar(&opts.ExitWhenDone, "exit-when-done", false, "exit after the summary instead of keeping the UI up")
	flag.DurationVar(&opts.Timeout, "timeout", 0, "how long the jobs may take (default 5m)")
	flag.DurationVar(&opts.WorkDuration, "work", 0, "how long each simulated job runs (default 3s)")
	flag.StringVar(&opts.MetricsListen, "metrics-listen", "127.0.0.1:0", "where /metrics is served")
	verbose := flag.Bool("v", false, "show the components' logs")
	flag.Parse()
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	opts.Out = os.Stdout
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// client-go (the pod watcher's informer and leader election) logs through klog: through the
	// demo's logger too, so its lines show only with -v, like every other component's.
	klog.SetSlogLogger(opts.Logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := demo.Run(ctx, opts); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
