package testworld

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
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
