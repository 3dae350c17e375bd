// Command demo runs runnerflow locally: the test world (Temporal dev server with its Web UI, a
// real kube-apiserver, the GitHub double and the runner simulator). Until the worker and starter
// ship, it starts the world alone and prints where to look.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/runnerflow/runnerflow/internal/testworld"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	world, err := testworld.StartWorld(ctx, testworld.WorldOptions{UI: true, Logger: logger})
	if err != nil {
		return err
	}
	defer world.Stop()
	fmt.Printf("Temporal UI:      %s\n", world.Temporal.UIAddress)
	fmt.Printf("Temporal address: %s (namespace %s)\n", world.Temporal.Address, world.Temporal.Namespace)
	fmt.Printf("Kubeconfig:       %s\n", world.Kube.KubeconfigPath)
	fmt.Printf("GitHub double:    %s\n", world.GitHub.URL())
	fmt.Println("The test world is up (worker and starter are not wired in yet). Ctrl-C stops it.")
	<-ctx.Done()
	return nil
}
