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
	if p := res.Peer; p.Version != testworld.ARCVersion || p.SyncPeriodSeconds != 10 || p.BatchSeconds != arcBatchSeconds || p.ScaleDownDelaySeconds != 15 {
		t.Errorf("peer settings %+v", p)
	}
	var table bytes.Buffer
	printTable(&table, res)
	t.Log("\n" + table.String())
	for _, want := range []string{"RUNNERFLOW  ARC", "webhook → pod create p50", "all 4 jobs started after", "runner lifecycles per job",
		"2 GitHub REST calls, N=4", "4 Kubernetes writes, N=4", "ARC GitHub calls:", "ARC Kubernetes writes:"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
}

func checkPeerBurst(t *testing.T, b PeerBurstResult) {
	t.Helper()
	if b.Jobs != 4 || b.JobsOnPeerPods != b.Jobs || b.Runners < b.Jobs {
		t.Errorf("ARC burst: %d of %d jobs ran on pods ARC created, %d runner lifecycles; want every job on an ARC pod, a runner each",
			b.JobsOnPeerPods, b.Jobs, b.Runners)
	}
	l := b.Latency
	for name, p := range map[string]Percentiles{"pod create": l.ToPodCreate, "online": l.ToOnline, "started": l.ToStarted} {
		if p.N != b.Jobs {
			t.Errorf("ARC latency to %s measured for %d jobs, want %d", name, p.N, b.Jobs)
		}
	}
	ordered := func(v ...float64) bool { return slices.IsSorted(v) }
	if !ordered(l.ToPodCreate.P50ms, l.ToOnline.P50ms, l.ToStarted.P50ms) || !ordered(l.ToPodCreate.MaxMs, l.ToOnline.MaxMs, l.ToStarted.MaxMs) || l.AllStartedSeconds <= 0 {
		t.Errorf("ARC latencies out of causal order: %+v", l)
	}
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
