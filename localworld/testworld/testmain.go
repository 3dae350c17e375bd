package testworld

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// startTimeout bounds the start of a package's world; a cold start takes a few seconds.
const startTimeout = 3 * time.Minute

// RunTests is the body of an integration package's TestMain: it starts one world for the
// package, stores it in *world, runs the tests and stops the world. It returns the exit code.
//
//	func TestMain(m *testing.M) { os.Exit(testworld.RunTests(m, testworld.WorldOptions{}, &world)) }
func RunTests(m *testing.M, opts WorldOptions, world **World) int {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	w, err := StartWorld(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test world:", err)
		return 1
	}
	defer w.Stop()
	*world = w
	return m.Run()
}

// ShortenRestWaits gives the policy's waits at rest (workflows/policy.go, "Waits at rest that a
// test world shortens") the lengths a test waits out: a pool at rest checks its runner workflows
// every 30 s instead of 5 min, lists its runners every 30 s instead of 2 min (still twice the
// 15 s it lists at while runners register, so the two paces stay apart), and a pod refused for
// quota is tried again at least every 10 s instead of every minute. Call it in TestMain before
// RunTests: the package's in-process workers read them; a worker binary a test starts keeps the
// production lengths.
func ShortenRestWaits() {
	ShortRestWaits.Apply()
}

// ShortRestWaits are the lengths ShortenRestWaits puts in force.
var ShortRestWaits = workflows.RestWaits{
	PoolRunnerCheckInterval: 30 * time.Second,
	PoolListingInterval:     30 * time.Second,
	QuotaRetryMax:           10 * time.Second,
}
