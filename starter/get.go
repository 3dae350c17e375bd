package main

import (
	"context"
	"io"

	"github.com/runnerflow/runnerflow/internal/poolcli"
)

// runGet is `starter get [pool]`: one pool's status (the pool workflow's status query), or a
// table of all running pools.
func runGet(ctx context.Context, args []string, stdout io.Writer) error {
	return poolcli.RunGet(ctx, args, stdout)
}
