package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWorkerAddrsComeFromItsRunningLine(t *testing.T) {
	log := filepath.Join(t.TempDir(), "worker.log")
	lines := `{"time":"x","level":"INFO","msg":"Starting"}
not json
{"time":"x","level":"INFO","msg":"Worker running","metricsAddr":"127.0.0.1:4001","pprofAddr":"127.0.0.1:4002"}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, found, err := readWorkerAddrs(log)
	if err != nil || !found || addrs != (workerAddrs{Metrics: "127.0.0.1:4001", Pprof: "127.0.0.1:4002"}) {
		t.Errorf("addrs %+v, found %t, %v", addrs, found, err)
	}
	if err := os.WriteFile(log, []byte(`{"msg":"Starting"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, found, err := readWorkerAddrs(log); found || err != nil {
		t.Errorf("found %t, %v before the line was written", found, err)
	}
}

func TestMemStatsOfTheHeapProfile(t *testing.T) {
	var b memoryBreakdown
	parseMemStats([]byte(`heap profile: 1: 2 [3: 4] @ heap/1048576
# runtime.MemStats
# Alloc = 10485760
# HeapAlloc = 10485760
# HeapIdle = 8388608
# HeapInuse = 12582912
# HeapReleased = 2097152
# Stack = 4194304 / 4194304
# NumGC = 12
`), &b)
	if b.HeapAllocKiB != 10240 || b.HeapInuseKiB != 12288 || b.HeapKeptKiB != 6144 || b.StackInuseKiB != 4096 {
		t.Errorf("breakdown %+v", b)
	}
}

func TestGoroutineGroupsLargestFirstWithWhoseTheyAre(t *testing.T) {
	dump := `goroutine profile: total 7
2 @ 0x1 0x2
#	0x1	runtime.gopark+0x1	/go/src/runtime/proc.go:1
#	0x2	net/http.(*conn).serve+0x2	/go/src/net/http/server.go:2

5 @ 0x1 0x3 0x4 0x5
#	0x1	runtime.gopark+0x1	/go/src/runtime/proc.go:1
#	0x3	go.temporal.io/sdk/internal.(*coroutineState).yield+0x3	/sdk/internal_workflow.go:3
#	0x4	github.com/runnerflow/runnerflow/workflows.(*runner).wait+0x4	/w/runner_watch.go:4
#	0x5	go.temporal.io/sdk/internal.(*dispatcherImpl).newNamedCoroutine.func1+0x5	/sdk/internal_workflow.go:5
`
	total, groups := parseGoroutines([]byte(dump), 5)
	want := []string{
		"5 × github.com/runnerflow/runnerflow/workflows.(*runner).wait … go.temporal.io/sdk/internal.(*dispatcherImpl).newNamedCoroutine.func1",
		"2 × net/http.(*conn).serve … net/http.(*conn).serve",
	}
	if total != 7 || !slices.Equal(groups, want) {
		t.Errorf("total %d, groups %q", total, groups)
	}
}

func TestPprofTopTableRows(t *testing.T) {
	top := []string{
		"File: worker", "Type: inuse_space", "Showing nodes accounting for 10MB, 100% of 10MB total",
		"      flat  flat%   sum%        cum   cum%", "    6MB 60% 60%  6MB 60%  a.b", "    4MB 40% 100%  4MB 40%  c.d", "",
		"      flat  flat%   sum%        cum   cum%", "    0 0% 0%  10MB 100%  main.main", "",
	}
	if got := entriesOnly(top); !slices.Equal(got, []string{"6MB 60% 60%  6MB 60%  a.b", "4MB 40% 100%  4MB 40%  c.d"}) {
		t.Errorf("rows %q", got)
	}
}

func TestCPUSecondsFromProcStat(t *testing.T) {
	// Fields 14 and 15 are utime and stime, in USER_HZ; the command name may hold spaces.
	stat := "4242 (runnerflow worker) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 100 1000 200"
	if got, err := parseCPUSeconds(stat); err != nil || got != 3.25 {
		t.Errorf("cpu %v s, %v; want 3.25", got, err)
	}
	if _, err := parseCPUSeconds("garbage"); err == nil {
		t.Error("a line without a command name was read")
	}
}

// A wake-up group's work is what the worker did over it less what the idle worker does in as
// long.
func TestWorkNetOfIdle(t *testing.T) {
	before := workerWork{cpuSec: 10, misses: 100, hits: 50, tasks: 400, replaySec: 2}
	after := workerWork{cpuSec: 12, misses: 130, hits: 90, tasks: 500, replaySec: 2.5}
	idle := workerWork{cpuSec: 0.05, misses: 1, hits: 2, tasks: 4, replaySec: 0.01}
	got := after.since(before, idle, 10)
	want := workerWork{cpuSec: 1.5, misses: 20, hits: 20, tasks: 60, replaySec: 0.4}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if !near(got.cpuSec, want.cpuSec) || !near(got.misses, want.misses) || !near(got.hits, want.hits) ||
		!near(got.tasks, want.tasks) || !near(got.replaySec, want.replaySec) {
		t.Errorf("net work %+v, want %+v", got, want)
	}
}
