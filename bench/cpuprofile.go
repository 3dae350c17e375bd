package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
)

// burstCPUProfile starts a CPU profile of the benchmark's process, which runs the worker (its
// workflows and activities), the intake and the simulator, from a burst's first webhook until
// every job started, when --cpu-profile names a file: a burst of n jobs writes
// <file without .pprof>-<n>.pprof. The returned stop ends it (a no-op without the option), so
// a decider's workflow-task cost can be read by function (`go tool pprof -top`).
func burstCPUProfile(path string, n int) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(fmt.Sprintf("%s-%d.pprof", strings.TrimSuffix(path, ".pprof"), n))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
