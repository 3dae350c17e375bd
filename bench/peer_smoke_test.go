package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// TestPeerARCRunsEndToEnd runs `bench --peer arc` with tiny settings (4 jobs, bursts only):
// runnerflow's burst in its world, then the same burst with actions-runner-controller in a
// fresh world. It checks that every figure of the comparison was produced for both systems,
// and that ARC really ran the jobs (each job's runner is a pod ARC created); it never judges
// speed. ARC's resync period is shortened so its scale-down does not wait a minute.
func TestPeerARCRunsEndToEnd(t *testing.T) {
	opts := Options{
		Jobs: []int{4}, Idle: []int{1}, Rate: 1, LoadDuration: time.Second, Skip: []string{"throughput", "memory"},
		JobDuration: time.Second, PhaseTimeout: 5 * time.Minute, GitHubBudget: 1_000_000, GitHubPointsPerMinute: 900,
		LogPath: filepath.Join(t.TempDir(), "bench.log"), Peer: peerARC, PeerSyncPeriod: 10 * time.Second,
	}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := run(ctx, opts, &progress)
	t.Log("\n" + progress.String())
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("run: %v; failed phases: %q", err, res.Failures)
	}
	if len(res.Bursts) != 1 || res.Peer == nil || len(res.Peer.Bursts) != 1 {
		t.Fatalf("want one burst of each system: runnerflow %d, peer %+v", len(res.Bursts), res.Peer)
	}
	checkBurst(t, res.Bursts[0])
	checkPeerBurst(t, res.Peer.Bursts[0])
	if p := res.Peer; p.Version != testworld.ARCVersion || p.Mode != modeSummerwind || p.SyncPeriodSeconds != 10 || p.BatchSeconds != arcBatchSeconds || p.ScaleDownDelaySeconds != 15 {
		t.Errorf("peer settings %+v", p)
	}
	var table bytes.Buffer
	printTable(&table, res)
	t.Log("\n" + table.String())
	for _, want := range []string{"RUNNERFLOW  ARC", "webhook → pod create p50", "all 4 jobs started after", "runner lifecycles per job",
		"2 GitHub REST calls, N=4", "4 Kubernetes writes, N=4", "ARC summerwind GitHub calls:", "ARC summerwind Kubernetes writes:"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
}

// TestPeerARCScaleSetRunsEndToEnd runs `bench --peer arc-scaleset` with tiny settings (4 jobs,
// bursts only): runnerflow's burst in its world, then the same burst with ARC
// gha-runner-scale-set 0.14.2 in a fresh world, where the listeners poll the double and take
// no webhooks. It skips only where that release's tools are not built (its source, which the
// module proxy does not serve, was absent when scripts/tools.sh ran). It checks
// that every figure of the comparison was produced for both systems and that ARC's scale-set
// controller really ran the jobs (each job's runner is an EphemeralRunner's pod ARC created);
// it never judges speed.
func TestPeerARCScaleSetRunsEndToEnd(t *testing.T) {
	if err := testworld.ARCScaleSetTools(); err != nil {
		t.Skip(err)
	}
	opts := Options{
		Jobs: []int{4}, Idle: []int{1}, Rate: 1, LoadDuration: time.Second, Skip: []string{"throughput", "memory"},
		JobDuration: time.Second, PhaseTimeout: 5 * time.Minute, GitHubBudget: 1_000_000, GitHubPointsPerMinute: 900,
		LogPath: filepath.Join(t.TempDir(), "bench.log"), Peer: peerARCScaleSet, PeerSyncPeriod: 10 * time.Second,
	}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := run(ctx, opts, &progress)
	t.Log("\n" + progress.String())
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("run: %v; failed phases: %q", err, res.Failures)
	}
	if len(res.Bursts) != 1 || res.Peer != nil || res.PeerScaleSet == nil || len(res.PeerScaleSet.Bursts) != 1 {
		t.Fatalf("want one burst of runnerflow and of ARC's scale sets alone: runnerflow %d, scale sets %+v, summerwind %+v",
			len(res.Bursts), res.PeerScaleSet, res.Peer)
	}
	checkBurst(t, res.Bursts[0])
	checkARCScaleSetBurst(t, res.PeerScaleSet.Bursts[0])
	if p := res.PeerScaleSet; p.Version != testworld.ARCScaleSetVersion || p.Mode != modeScaleSets {
		t.Errorf("peer %+v", p)
	}
	var table bytes.Buffer
	printTable(&table, res)
	t.Log("\n" + table.String())
	for _, want := range []string{"RUNNERFLOW  ARC SCALE SETS", "webhook → pod create p50", "all 4 jobs started after", "runner lifecycles per job",
		"2 GitHub REST calls, N=4", "4 Kubernetes writes, N=4", "ARC scale sets GitHub calls:", "ARC scale sets Kubernetes writes:", "Actions service calls per job (not REST)",
		"ARC scale sets Actions service calls:",
		"ARC scale sets: no webhooks (its listeners poll); 4 of 4 jobs ran on pods it created"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
}

// TestPeersRunWarmEndToEnd runs `bench --peer arc,arc-scaleset --warm 4` with tiny settings
// (4 jobs, bursts only): runnerflow's pools mint 2 warm registrations each, ARC's runner
// deployments keep 2 runners each (replicas and minReplicas) and its scale sets 2 each
// (minRunners). It checks that each peer had its warm runners ready when the jobs were
// queued, that its jobs ran on pods it created, some on those warm runners, and that figure
// 1 was measured for every job; it never judges speed. It skips where ARC 0.14.2's tools are
// not built, as TestPeerARCScaleSetRunsEndToEnd does.
func TestPeersRunWarmEndToEnd(t *testing.T) {
	if err := testworld.ARCScaleSetTools(); err != nil {
		t.Skip(err)
	}
	opts := Options{
		Jobs: []int{4}, Warm: 4, Idle: []int{1}, Rate: 1, LoadDuration: time.Second, Skip: []string{"throughput", "memory"},
		JobDuration: time.Second, PhaseTimeout: 5 * time.Minute, GitHubBudget: 1_000_000, GitHubPointsPerMinute: 900,
		LogPath: filepath.Join(t.TempDir(), "bench.log"), Peer: peerARC + "," + peerARCScaleSet, PeerSyncPeriod: 10 * time.Second,
	}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := run(ctx, opts, &progress)
	t.Log("\n" + progress.String())
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("run: %v; failed phases: %q", err, res.Failures)
	}
	if len(res.Bursts) != 1 || res.Bursts[0].Warm != 4 || res.Bursts[0].Latency.ToStarted.N != 4 {
		t.Fatalf("runnerflow's bursts %+v: want one, its 4 jobs started with 4 warm registrations minted", res.Bursts)
	}
	for _, p := range []*PeerResult{res.Peer, res.PeerScaleSet} {
		if p == nil || len(p.Bursts) != 1 {
			t.Fatalf("want one burst of each peer: %+v", p)
		}
		b := p.Bursts[0]
		if b.Warm != 4 || b.JobsOnPeerPods != b.Jobs || b.JobsOnWarmRunners == 0 || b.JobsOnWarmRunners > b.Jobs {
			t.Errorf("%s: %d warm runners ready, %d of %d jobs on its pods, %d on warm runners; want 4 ready, every job on its pods, some on warm runners",
				peerShort(p), b.Warm, b.JobsOnPeerPods, b.Jobs, b.JobsOnWarmRunners)
		}
		checkPeerLatency(t, b)
		if k := b.Kubernetes; k.Writes != sum(k.ByKind) || k.PerJob != ratio(k.Writes, b.Jobs) {
			t.Errorf("%s's writes %d (%v): want consistent counts", peerShort(p), k.Writes, k.ByKind)
		}
	}
	var table bytes.Buffer
	printTable(&table, res)
	t.Log("\n" + table.String())
	for _, want := range []string{"ARC summerwind: 0 of 12 webhook deliveries refused", "ARC scale sets: no webhooks", "4 warm runners ready when the jobs were queued"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
}

// checkARCScaleSetBurst checks a scale-set burst's figures: every job on a pod ARC's controller
// created for an EphemeralRunner, each latency measured for every job in causal order, runners
// registered with JIT configurations, and the writes of ARC's controller, its listeners and
// the garbage collector counted.
func checkARCScaleSetBurst(t *testing.T, b PeerBurstResult) {
	t.Helper()
	if b.Jobs != 4 || b.JobsOnPeerPods != b.Jobs || b.Runners < b.Jobs || b.WebhooksSent != 0 {
		t.Errorf("ARC scale-set burst: %d of %d jobs ran on pods ARC created, %d runner lifecycles, %d webhooks; want every job on an ARC pod, a runner each, no webhook",
			b.JobsOnPeerPods, b.Jobs, b.Runners, b.WebhooksSent)
	}
	checkPeerLatency(t, b)
	if g := b.GitHub; g.Calls != sum(g.ByEndpoint) || g.PerJob != ratio(g.Calls, b.Jobs) {
		t.Errorf("ARC's GitHub REST calls %d %v: want consistent counts", g.Calls, g.ByEndpoint)
	}
	if a := b.ActionsService; a == nil || a.Calls != sum(a.ByEndpoint) || a.PerJob != ratio(a.Calls, b.Jobs) || !hasKeyWith(a.ByEndpoint, "/generatejitconfig ") {
		t.Errorf("ARC's Actions service calls %+v: want JIT configurations, and consistent counts", a)
	}
	k := b.Kubernetes
	if created := k.ByKind["create pods"]; created < b.Jobs || created > b.Runners || k.ByKind["create ephemeralrunners"] != b.Runners {
		t.Errorf("ARC's writes %v for %d runners: want an EphemeralRunner per lifecycle and a pod for each one that ran a job", k.ByKind, b.Runners)
	}
	if k.Writes != sum(k.ByKind) || k.PerJob != ratio(k.Writes, b.Jobs) || !hasKeyWith(k.ByKind, "(listener)") {
		t.Errorf("ARC's writes %d (%v): want consistent counts and the listeners' scaling writes", k.Writes, k.ByKind)
	}
}

// checkPeerLatency checks that figure 1 was measured for every job of a peer's burst, in
// causal order (all started may round to 0 s when warm runners took every job).
func checkPeerLatency(t *testing.T, b PeerBurstResult) {
	t.Helper()
	l := b.Latency
	for name, p := range map[string]Percentiles{"pod create": l.ToPodCreate, "online": l.ToOnline, "started": l.ToStarted} {
		if p.N != b.Jobs {
			t.Errorf("ARC latency to %s measured for %d jobs, want %d", name, p.N, b.Jobs)
		}
	}
	ordered := func(v ...float64) bool { return slices.IsSorted(v) }
	if !ordered(l.ToPodCreate.P50ms, l.ToOnline.P50ms, l.ToStarted.P50ms) || !ordered(l.ToPodCreate.MaxMs, l.ToOnline.MaxMs, l.ToStarted.MaxMs) || l.AllStartedSeconds < 0 {
		t.Errorf("ARC latencies out of causal order: %+v", l)
	}
}

func hasKeyWith(m map[string]int, part string) bool {
	for k, v := range m {
		if strings.Contains(k, part) && v > 0 {
			return true
		}
	}
	return false
}

func checkPeerBurst(t *testing.T, b PeerBurstResult) {
	t.Helper()
	if b.Jobs != 4 || b.JobsOnPeerPods != b.Jobs || b.Runners < b.Jobs {
		t.Errorf("ARC burst: %d of %d jobs ran on pods ARC created, %d runner lifecycles; want every job on an ARC pod, a runner each",
			b.JobsOnPeerPods, b.Jobs, b.Runners)
	}
	checkPeerLatency(t, b)
	if b.WebhooksRefused != 0 || b.WebhooksSent != 3*b.Jobs {
		t.Errorf("ARC refused %d of %d webhook deliveries; want all of queued, in_progress and completed per job taken", b.WebhooksRefused, b.WebhooksSent)
	}
	g := b.GitHub
	if g.Calls != sum(g.ByEndpoint) || g.ByEndpoint["POST /orgs/{org}/actions/runners/registration-token 201"] == 0 || g.PerJob != ratio(g.Calls, b.Jobs) {
		t.Errorf("ARC's GitHub calls %d %v: want registration tokens, and consistent counts", g.Calls, g.ByEndpoint)
	}
	k := b.Kubernetes
	if created := k.ByKind["create pods"]; created < b.Jobs || created > b.Runners || k.ByKind["create runners"] != b.Runners {
		t.Errorf("ARC's writes %v for %d runners: want a Runner per lifecycle and a pod for each one that ran a job", k.ByKind, b.Runners)
	}
	if k.Writes != sum(k.ByKind) || k.PerJob != ratio(k.Writes, b.Jobs) || b.GarbageCollectorWrites == 0 {
		t.Errorf("ARC's writes %d (%v), garbage collector's %d: want consistent counts and the collector deleting ARC's pods",
			k.Writes, k.ByKind, b.GarbageCollectorWrites)
	}
}

// TestPeerTableShowsRatios: the comparison divides runnerflow's figure by the peer's, and
// shows a dash where a side has no figure.
func TestPeerTableShowsRatios(t *testing.T) {
	r := Results{
		Options: OptionsSummary{Jobs: []int{10, 20}},
		Bursts: []BurstResult{{Jobs: 10, Runners: 10, GitHub: GitHubResult{PerJob: 1}, Kubernetes: KubernetesResult{PerJob: 5},
			Latency: LatencyResult{ToPodCreate: Percentiles{P50ms: 1000}, AllStartedSeconds: 4}}},
		Peer: &PeerResult{Name: "actions-runner-controller", Version: "v0", Bursts: []PeerBurstResult{
			{Jobs: 10, Runners: 20, GitHub: GitHubResult{PerJob: 4}, Kubernetes: KubernetesResult{PerJob: 40},
				Latency: PeerLatency{ToPodCreate: Percentiles{P50ms: 4000}, AllStartedSeconds: 2}},
			{Jobs: 20, Runners: 20},
		}},
	}
	var out bytes.Buffer
	printPeer(&out, r)
	for _, want := range [][]string{
		{"webhook → pod create p50", "1000 ms", "4000 ms", "0.25"},
		{"all 10 jobs started after", "4.0 s", "2.0 s", "2.00"},
		{"runner lifecycles per job", "1.00", "2.00", "0.50"},
		{"2 GitHub REST calls, N=10", "per job", "1.00", "4.00", "0.25"},
		{"4 Kubernetes writes, N=10", "per job", "5.00", "40.00", "0.12"},
		{"4 Kubernetes writes, N=20", "per job", "–", "0.00", "–"},
	} {
		if !hasLine(out.String(), want...) {
			t.Errorf("no line with %q in\n%s", want, out.String())
		}
	}
}

// TestPeerTableShowsBothARCModes: with both peers measured, each has its column and its ratio,
// ARC's scale sets first, and each its breakdown.
func TestPeerTableShowsBothARCModes(t *testing.T) {
	r := Results{
		Options: OptionsSummary{Jobs: []int{10}},
		Bursts: []BurstResult{{Jobs: 10, Runners: 10, GitHub: GitHubResult{PerJob: 2},
			Latency: LatencyResult{ToStarted: Percentiles{MaxMs: 3000}}}},
		Peer: &PeerResult{Name: "actions-runner-controller", Mode: modeSummerwind, Version: "v0", Bursts: []PeerBurstResult{
			{Jobs: 10, Runners: 10, WebhooksSent: 30, GitHub: GitHubResult{PerJob: 8}, Latency: PeerLatency{ToStarted: Percentiles{MaxMs: 12000}}},
		}},
		PeerScaleSet: &PeerResult{Name: "actions-runner-controller", Mode: modeScaleSets, Version: "v0", Bursts: []PeerBurstResult{
			{Jobs: 10, Runners: 10, JobsOnPeerPods: 10, GitHub: GitHubResult{PerJob: 4}, Latency: PeerLatency{ToStarted: Percentiles{MaxMs: 6000}}},
		}},
	}
	var out bytes.Buffer
	printPeer(&out, r)
	for _, want := range [][]string{
		{"RUNNERFLOW", "ARC SCALE SETS", "RATIO", "ARC SUMMERWIND", "RATIO"},
		{"webhook → job started max", "3000 ms", "6000 ms", "0.50", "12000 ms", "0.25"},
		{"2 GitHub REST calls, N=10", "per job", "2.00", "4.00", "0.50", "8.00", "0.25"},
		{"ARC scale sets: no webhooks (its listeners poll); 10 of 10 jobs ran on pods it created"},
		{"ARC summerwind: 0 of 30 webhook deliveries refused"},
		{"(scale sets)", "figure 1 starts when the job was queued at the double"},
	} {
		if !hasLine(out.String(), want...) {
			t.Errorf("no line with %q in\n%s", want, out.String())
		}
	}
	if strings.Index(out.String(), "ARC SCALE SETS") > strings.Index(out.String(), "ARC SUMMERWIND") {
		t.Errorf("ARC's scale sets should come first:\n%s", out.String())
	}
}

func hasLine(text string, fields ...string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		all := true
		for _, f := range fields {
			all = all && strings.Contains(line, f)
		}
		if all {
			return true
		}
	}
	return false
}
