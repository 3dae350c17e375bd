// Command starter is runnerflow's front door: `starter serve` takes GitHub's webhooks and hands
// them to Temporal; `starter apply` and `starter get` manage pools.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/runnerflow/runnerflow"
)

const usage = `usage: starter <command> [flags]

commands:
  serve   take GitHub workflow_job webhooks and feed the pools' scale windows
  apply   start or update pools from a pools file (-f pools.yaml)
  get     show one pool's status, or all pools

Run "starter <command> -h" for a command's flags; "starter --version" prints the release.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

// run dispatches to a subcommand.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("no command given\n%s", usage)
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout)
	case "apply":
		return runApply(ctx, args[1:], stdout)
	case "get":
		return runGet(ctx, args[1:], stdout)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, runnerflow.Version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
