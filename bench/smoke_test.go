package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchmarkRunsEndToEnd runs the whole benchmark with tiny settings (4 jobs, 20 idle
// runners, 2 s of webhooks) in the real test world, so the code path behind `make bench`
// keeps working. It checks that every figure was produced and agrees with the counters it
// comes from; it never judges speed.
func TestBenchmarkRunsEndToEnd(t *testing.T) {
	opts := Options{
		Jobs: []int{4}, Idle: []int{20}, Rate: 20, LoadDuration: 2 * time.Second,
		JobDuration: time.Second, PhaseTimeout: 5 * time.Minute, GitHubBudget: 1_000_000, GitHubPointsPerMinute: 900,
		MemoryKubeQPS: 50, LogPath: filepath.Join(t.TempDir(), "bench.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := run(ctx, opts, &progress)
	t.Log("\n" + progress.String())
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("run: %v; failed phases: %q", err, res.Failures)
	}
	if len(res.Bursts) != 1 || res.Throughput == nil || res.Memory == nil {
		t.Fatalf("results lack a phase: %d bursts, throughput %v, memory %v", len(res.Bursts), res.Throughput, res.Memory)
	}
	checkBurst(t, res.Bursts[0])
	checkThroughput(t, *res.Throughput, opts)
	checkMemory(t, *res.Memory, opts.Idle[0])
	checkOutputs(t, res)
}

func checkBurst(t *testing.T, b BurstResult) {
	t.Helper()
	if b.Jobs != 4 || b.Runners < b.Jobs {
		t.Errorf("burst of %d jobs had %d runner lifecycles, want at least one per job", b.Jobs, b.Runners)
	}
	l := b.Latency
	for name, p := range map[string]Percentiles{"pool decision": l.ToPoolDecision, "runner workflow": l.ToRunnerWorkflow, "pod create": l.ToPodCreate, "online": l.ToOnline, "started": l.ToStarted} {
		if p.N != b.Jobs {
			t.Errorf("latency to %s measured for %d jobs, want %d", name, p.N, b.Jobs)
		}
	}
	// Per job the pool decides before the runner workflow starts, which is before it creates the pod, the pod before the runner
	// comes online, and that before it starts the job; so every percentile keeps that order.
	ordered := func(v ...float64) bool { return slices.IsSorted(v) }
	if !ordered(l.ToPoolDecision.P50ms, l.ToRunnerWorkflow.P50ms, l.ToPodCreate.P50ms, l.ToOnline.P50ms, l.ToStarted.P50ms) ||
		!ordered(l.ToPoolDecision.MaxMs, l.ToRunnerWorkflow.MaxMs, l.ToPodCreate.MaxMs, l.ToOnline.MaxMs, l.ToStarted.MaxMs) {
		t.Errorf("latencies out of causal order: %+v", l)
	}
	if l.AllStartedSeconds <= 0 {
		t.Errorf("all jobs started after %v s", l.AllStartedSeconds)
	}
	// The operator's view: each pool's status was asked while the jobs started, and the intake
	// answered at least every job's queued delivery (res.Bursts are webhook bursts).
	if o := b.Operator; o.StatusQuery.N == 0 || o.StatusQueryFailures > o.StatusQuery.N || o.Deliveries < b.Jobs || o.Answered503 > o.Deliveries {
		t.Errorf("operator figures %+v: want status queries measured and every queued delivery answered", o)
	}

	g := b.GitHub
	if g.Calls <= 0 || g.Calls != sum(g.ByEndpoint) || g.PerRunner != ratio(g.Calls, b.Runners) {
		t.Errorf("GitHub calls %d, by endpoint %v, per runner %v: want > 0, consistent, and calls / %d runners", g.Calls, g.ByEndpoint, g.PerRunner, b.Runners)
	}
	// Every registered runner got one JIT configuration and one pod; a runner the pool drained
	// before it registered got neither. Every job needed a registered runner.
	registered := g.ByEndpoint["POST /orgs/{org}/actions/runners/generate-jitconfig 201"]
	if registered < b.Jobs || registered > b.Runners {
		t.Errorf("%d JIT registrations for %d jobs and %d runner lifecycles", registered, b.Jobs, b.Runners)
	}

	tc := b.Temporal
	if tc.RunnerWorkflows.Runs < b.Runners || tc.RunnerWorkflows.Actions.WorkflowStarts < b.Runners || tc.RunnerWorkflows.Actions.Activities < 2*registered {
		t.Errorf("runner workflow histories %+v for %d runners, %d registered: want a start each, and register + create pod per registration",
			tc.RunnerWorkflows, b.Runners, registered)
	}
	// Each window hands its batch to its pool by signal: the pools receive at least one signal
	// a window run besides their runners' reports (two a runner at most: busy and its end).
	if tc.PoolWorkflows.Actions.Signals < tc.ScaleWindows.Runs || tc.ScaleWindows.Runs == 0 || tc.RunnerOnlyActionsPerRunner <= 0 || tc.ActionsPerRunner <= tc.RunnerOnlyActionsPerRunner {
		t.Errorf("Temporal cost %+v: want the scale windows' batches signalled to the pools, and pools and windows adding to the runners' own cost", tc)
	}
	if tc.ActionsPerRunner != ratio(tc.total().Actions.Total(), b.Runners) {
		t.Errorf("actions per runner %v, want total %d / %d", tc.ActionsPerRunner, tc.total().Actions.Total(), b.Runners)
	}

	k := b.Kubernetes
	if k.ByKind["create pods"] != registered || k.Writes+k.LeaseWrites != sum(k.ByKind) || k.PerRunner != ratio(k.Writes, b.Runners) {
		t.Errorf("Kubernetes writes %d (%v), %v per runner: want one pod create per registered runner (%d) and consistent counts",
			k.Writes, k.ByKind, k.PerRunner, registered)
	}
}

func checkThroughput(t *testing.T, r ThroughputResult, opts Options) {
	t.Helper()
	offered := int(float64(opts.Rate) * opts.LoadDuration.Seconds())
	if r.Sent != offered || r.Acked != offered || r.Failed != 0 || r.AckTime.N != r.Acked || r.AckedPerSecond <= 0 {
		t.Errorf("load: sent %d, acked %d, failed %d, %d ack times, %v/s; want all %d acknowledged", r.Sent, r.Acked, r.Failed, r.AckTime.N, r.AckedPerSecond, offered)
	}
	if r.Lost != 0 || r.Reserved != r.Acked {
		t.Errorf("%d events lost: %d reservations for %d acknowledged events", r.Lost, r.Reserved, r.Acked)
	}
	// The intake has no GitHub client and the pools have no runners to list.
	if r.GitHubCalls != 0 || r.GitHubCallsPerEvent != 0 {
		t.Errorf("%d GitHub calls while handling webhooks, want none", r.GitHubCalls)
	}
	if r.Temporal.Actions.Signals == 0 || r.ActionsPerEvent != ratio(r.Temporal.Actions.Total(), r.Acked) {
		t.Errorf("Temporal cost of the webhooks %+v, %v actions per event: want signals, and total / events", r.Temporal, r.ActionsPerEvent)
	}
}

func checkMemory(t *testing.T, m MemoryResult, k int) {
	t.Helper()
	if m.BaselineRSSKiB <= 0 || len(m.Points) != 1 {
		t.Fatalf("memory %+v: want a baseline and one point", m)
	}
	p := m.Points[0]
	if !p.Complete || p.Runners != k || p.Alive != k || p.Idle < k || p.RSSKiB <= 0 ||
		p.KiBPerRunner != round1(float64(p.RSSKiB-m.BaselineRSSKiB)/float64(k)) {
		t.Errorf("memory point %+v (baseline %d KiB): want %d runner workflows alive and idle, and (RSS − baseline) / K", p, m.BaselineRSSKiB, k)
	}
}

// checkOutputs: the table shows all six figures, and the JSON holds the same numbers.
func checkOutputs(t *testing.T, res Results) {
	t.Helper()
	var table bytes.Buffer
	printTable(&table, res)
	for _, fig := range []string{"1 scale-up latency", "2 GitHub REST calls", "3 Temporal", "4 Kubernetes writes", "5 worker memory", "6 starter throughput"} {
		if !strings.Contains(table.String(), fig) {
			t.Errorf("table lacks %q:\n%s", fig, table.String())
		}
	}
	t.Log("\n" + table.String())
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := writeJSON(path, res); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Errorf("JSON round trip differs:\n got %+v\nwant %+v", back, res)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
