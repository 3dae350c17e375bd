package main

import (
	"context"
	"io"

	"github.com/runnerflow/runnerflow/internal/poolcli"
)

// runWhy is `starter why <job id>`: the job's path and, while it waits, why.
func runWhy(ctx context.Context, args []string, stdout io.Writer) error {
	return poolcli.RunWhy(ctx, args, stdout)
}
