package main

import (
	"context"
	"io"

	"github.com/runnerflow/runnerflow/internal/poolcli"
)

// runApply is `starter apply -f pools.yaml`: validate every pool in the file (nothing starts if
// one is invalid), then start or update each pool workflow with update-with-start.
func runApply(ctx context.Context, args []string, stdout io.Writer) error {
	return poolcli.RunApply(ctx, args, stdout)
}
