package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// The memory figure says what a runner costs; these say where it goes. After each memory step
// the benchmark saves the worker's heap profile (live objects, after a collection), its
// goroutine dump and `go tool pprof -top` of the heap next to its log file, and prints the
// runtime's own split of the memory: live heap, heap the collector holds for growth, and
// goroutine stacks (a workflow in the SDK's sticky cache keeps its coroutines' stacks, which
// no heap profile shows).

// profileTopShown is how many of pprof's largest entries a progress line shows; the saved
// summary has profileTopSaved.
const (
	profileTopShown = 10
	profileTopSaved = 40
	goroutineGroups = 6
)

// workerAddrs are the worker process's listeners, as its "Worker running" log line names them
// (it binds free ports, so two runs never clash).
type workerAddrs struct {
	Metrics string `json:"metricsAddr"`
	Pprof   string `json:"pprofAddr"`
}

// readWorkerAddrs finds the "Worker running" line in the worker's JSON log.
func readWorkerAddrs(logPath string) (workerAddrs, bool, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return workerAddrs{}, false, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		var rec struct {
			Msg string `json:"msg"`
			workerAddrs
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "Worker running" {
			return rec.workerAddrs, true, nil
		}
	}
	return workerAddrs{}, false, nil
}

// memoryBreakdown is the worker's memory as its runtime accounts for it at one step.
type memoryBreakdown struct {
	// HeapAlloc is the live heap right after a collection; HeapInuse adds the spans'
	// fragmentation; HeapIdle − HeapReleased is heap the runtime keeps mapped for growth.
	HeapAllocKiB, HeapInuseKiB, HeapKeptKiB int
	// StackInuse holds the goroutine stacks.
	StackInuseKiB int
	Goroutines    int
	// StickyCached is the SDK's sticky workflow cache size gauge.
	StickyCached int
	// Work is what the worker did so far: its CPU, and the SDK's counters of workflow tasks,
	// replay time and sticky-cache misses and evictions.
	Work string
	// Top is pprof's largest entries by live bytes, GoroutineGroups the largest goroutine
	// groups by count (with the frame that says whose they are).
	Top, GoroutineGroups []string
	// Files are the saved profile, goroutine dump and summary.
	Files []string
}

// profile takes the breakdown of the worker's memory with k idle runners and saves the
// profiles next to the benchmark's log file.
func (e *env) profile(ctx context.Context, w *workerProcess, k int) (memoryBreakdown, error) {
	var b memoryBreakdown
	base := strings.TrimSuffix(e.logFile.Name(), filepath.Ext(e.logFile.Name())) + fmt.Sprintf("-worker-K%d", k)
	heapFile, dumpFile, topFile := base+"-heap.pb.gz", base+"-goroutines.txt", base+"-heap-top.txt"
	// gc=1 collects first, so the profile shows what is live, not what awaits collection.
	if err := w.fetchTo(ctx, w.addrs.Pprof, "/debug/pprof/heap?gc=1", heapFile); err != nil {
		return b, err
	}
	if err := w.fetchTo(ctx, w.addrs.Pprof, "/debug/pprof/goroutine?debug=1", dumpFile); err != nil {
		return b, err
	}
	stats, err := w.fetch(ctx, w.addrs.Pprof, "/debug/pprof/heap?debug=1")
	if err != nil {
		return b, err
	}
	parseMemStats(stats, &b)
	dump, err := os.ReadFile(dumpFile)
	if err != nil {
		return b, err
	}
	b.Goroutines, b.GoroutineGroups = parseGoroutines(dump, goroutineGroups)
	if m, err := w.metrics(ctx); err == nil {
		// Every worker of the process reports the one shared cache.
		b.StickyCached = int(m["temporal_sticky_cache_size|max"])
		b.Work = workSoFar(m)
	}
	if cpu, err := w.cpuSeconds(); err == nil {
		b.Work = fmt.Sprintf("worker CPU %.1f s so far; %s", cpu, b.Work)
	}
	top, err := pprofTop(ctx, heapFile)
	if err != nil {
		return b, err
	}
	summary := fmt.Sprintf("worker with %d idle runners: live heap %d KiB, heap in use %d KiB, heap kept for growth %d KiB, stacks %d KiB, %d goroutines, sticky cache %d workflows\n%s\n\n%s\n%s",
		k, b.HeapAllocKiB, b.HeapInuseKiB, b.HeapKeptKiB, b.StackInuseKiB, b.Goroutines, b.StickyCached, b.Work,
		strings.Join(top, "\n"), strings.Join(b.GoroutineGroups, "\n"))
	if err := os.WriteFile(topFile, []byte(summary+"\n"), 0o644); err != nil {
		return b, err
	}
	b.Top = entriesOnly(top)
	b.Files = []string{heapFile, dumpFile, topFile}
	return b, nil
}

// say prints the breakdown under the memory step's line.
func (b memoryBreakdown) say(e *env) {
	e.say("memory: live heap %d KiB, heap in use %d KiB, heap kept for growth %d KiB, stacks %d KiB (%d goroutines), sticky cache %d workflows",
		b.HeapAllocKiB, b.HeapInuseKiB, b.HeapKeptKiB, b.StackInuseKiB, b.Goroutines, b.StickyCached)
	e.say("memory: %s", b.Work)
	e.say("memory: largest live heap entries (pprof -top, inuse_space):")
	for _, l := range b.Top[:min(profileTopShown, len(b.Top))] {
		e.say("memory:   %s", l)
	}
	e.say("memory: largest goroutine groups:")
	for _, l := range b.GoroutineGroups {
		e.say("memory:   %s", l)
	}
	e.say("memory: profiles in %s", strings.Join(b.Files, ", "))
}

// workSoFar sums up the SDK's counters: workflow tasks and their replay time by workflow type,
// sticky-cache misses and forced evictions.
func workSoFar(m map[string]float64) string {
	const tasks, replay = "temporal_workflow_task_replay_latency_seconds_count|", "temporal_workflow_task_replay_latency_seconds_sum|"
	var parts []string
	for _, wt := range []string{workflows.RunnerWorkflowType, workflows.PoolWorkflowType} {
		parts = append(parts, fmt.Sprintf("%s workflow tasks %.0f (replaying %.1f s)", wt, m[tasks+wt], m[replay+wt]))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; sticky cache misses %.0f, forced evictions %.0f",
		m["temporal_sticky_cache_miss_total"], m["temporal_sticky_cache_total_forced_eviction_total"])
}

// pprofTop runs `go tool pprof -top` on a heap profile: flat live bytes, then cumulative.
func pprofTop(ctx context.Context, heapFile string) ([]string, error) {
	var lines []string
	for _, order := range [][]string{nil, {"-cum"}} {
		args := append([]string{"tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=" + strconv.Itoa(profileTopSaved)}, order...)
		out, err := exec.CommandContext(ctx, "go", append(args, heapFile)...).Output()
		if err != nil {
			return nil, fmt.Errorf("go tool pprof %s: %w", heapFile, err)
		}
		lines = append(lines, strings.Split(strings.TrimRight(string(out), "\n"), "\n")...)
		lines = append(lines, "")
	}
	return lines, nil
}

// entriesOnly keeps the first table of pprof's output: its rows after the header.
func entriesOnly(top []string) []string {
	var rows []string
	inTable := false
	for _, l := range top {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "flat "):
			inTable = true
		case l == "" && inTable:
			return rows
		case inTable:
			rows = append(rows, strings.TrimSpace(l))
		}
	}
	return rows
}

// parseMemStats reads the runtime.MemStats comment lines at the end of /debug/pprof/heap?debug=1.
func parseMemStats(text []byte, b *memoryBreakdown) {
	stats := map[string]int{}
	for line := range strings.SplitSeq(string(text), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok || !strings.HasPrefix(line, "# ") {
			continue
		}
		first, _, _ := strings.Cut(value, " ") // "# Stack = 123 / 456": in use / from the OS
		if n, err := strconv.Atoi(first); err == nil {
			stats[name] = n / 1024
		}
	}
	b.HeapAllocKiB, b.HeapInuseKiB, b.StackInuseKiB = stats["HeapAlloc"], stats["HeapInuse"], stats["Stack"]
	b.HeapKeptKiB = stats["HeapIdle"] - stats["HeapReleased"]
}

// parseGoroutines reads a goroutine dump (debug=1): the total and the largest groups, each
// with the frames that tell whose goroutines they are.
func parseGoroutines(dump []byte, n int) (int, []string) {
	total := 0
	type group struct {
		count  int
		frames []string
	}
	var groups []group
	for block := range strings.SplitSeq(string(dump), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if t, ok := strings.CutPrefix(lines[0], "goroutine profile: total "); ok {
			total, _ = strconv.Atoi(t)
			lines = lines[1:]
		}
		if len(lines) == 0 {
			continue
		}
		countText, _, _ := strings.Cut(lines[0], " @ ")
		count, err := strconv.Atoi(countText)
		if err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" {
				fn, _, _ := strings.Cut(f[2], "+0x") // the offset into the function
				frames = append(frames, fn)
			}
		}
		groups = append(groups, group{count, frames})
	}
	slices.SortStableFunc(groups, func(a, b group) int { return b.count - a.count })
	var out []string
	for _, g := range groups[:min(n, len(groups))] {
		out = append(out, fmt.Sprintf("%d × %s", g.count, whose(g.frames)))
	}
	return total, out
}

// whose names a goroutine by its first frame outside the runtime and the Temporal SDK (a
// workflow's coroutine is blocked in the SDK, called from the workflow's own code), and by
// where it started.
func whose(frames []string) string {
	if len(frames) == 0 {
		return "?"
	}
	first := frames[0]
	for _, f := range frames {
		if !slices.ContainsFunc([]string{"runtime.", "sync.", "reflect.", "go.temporal.io/sdk/internal."}, func(p string) bool {
			return strings.HasPrefix(f, p)
		}) {
			first = f
			break
		}
	}
	return first + " … " + frames[len(frames)-1]
}

// metrics reads the worker's /metrics and sums each series name over its labels, under
// "name|type" over the series of one workflow type (the SDK's workflow_type label), and keeps
// the largest under "name|max".
func (w *workerProcess) metrics(ctx context.Context) (map[string]float64, error) {
	text, err := w.fetch(ctx, w.addrs.Metrics, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	s := bufio.NewScanner(bytes.NewReader(text))
	s.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, value := line, ""
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			series, value = line[:i], line[i+1:]
		}
		name, labels, _ := strings.Cut(series, "{")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		out[name] += v
		out[name+"|max"] = max(out[name+"|max"], v)
		if _, rest, ok := strings.Cut(labels, `workflow_type="`); ok {
			wt, _, _ := strings.Cut(rest, `"`)
			out[name+"|"+wt] += v
		}
	}
	return out, s.Err()
}

// fetch GETs a path from one of the worker's listeners.
func (w *workerProcess) fetch(ctx context.Context, addr, path string) ([]byte, error) {
	if addr == "" {
		return nil, fmt.Errorf("the worker serves no listener for %s", path)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, err
}

func (w *workerProcess) fetchTo(ctx context.Context, addr, path, file string) error {
	b, err := w.fetch(ctx, addr, path)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// cpuSeconds is the worker process's user and system CPU time so far, from /proc/<pid>/stat.
func (w *workerProcess) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	return parseCPUSeconds(string(b))
}

// userHZ is the unit of /proc's CPU times (USER_HZ), 100 on Linux's common architectures.
const userHZ = 100

// parseCPUSeconds reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat line; the
// command name (field 2) may hold spaces, so fields are counted after its closing parenthesis.
func parseCPUSeconds(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	return (utime + stime) / userHZ, nil
}
