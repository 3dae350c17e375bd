package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScaleSetBurstRunsEndToEnd runs `bench --scaleset` with tiny settings (4 jobs, bursts
// only): the webhook burst, then the same burst served by two scale-set pools whose sets are
// assigned their jobs, then by two whose sets are offered them. It checks that every figure of
// the scale-set bursts was produced and agrees with the counters it comes from: every step
// measured for every job, no REST call for any runner (their JIT configurations come from the
// sets' Actions service, one per pod), acquisitions made by the offered sets alone, and the
// listeners' histories counted. It never judges speed.
func TestScaleSetBurstRunsEndToEnd(t *testing.T) {
	opts := Options{
		Jobs: []int{4}, Idle: []int{1}, Rate: 1, LoadDuration: time.Second, Skip: []string{"throughput", "memory"},
		JobDuration: time.Second, PhaseTimeout: 5 * time.Minute, GitHubBudget: 1_000_000, GitHubPointsPerMinute: 900,
		LogPath: filepath.Join(t.TempDir(), "bench.log"), ScaleSet: true,
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
	if len(res.Bursts) != 1 || len(res.ScaleSetBursts) != 2 {
		t.Fatalf("want one webhook burst and two scale-set bursts: %d and %d", len(res.Bursts), len(res.ScaleSetBursts))
	}
	checkBurst(t, res.Bursts[0])
	for i, mode := range []string{modeScaleSet, modeScaleSetOffers} {
		b := res.ScaleSetBursts[i]
		if b.Mode != mode {
			t.Errorf("scale-set burst %d is %q, want %q", i, b.Mode, mode)
		}
		checkRunnerflowScaleSetBurst(t, b)
	}
	if a := res.ScaleSetBursts[0].ActionsService; a != nil && a.Acquisitions != 0 {
		t.Errorf("sets assigned their jobs made %d acquisitions, want none", a.Acquisitions)
	}
	if a := res.ScaleSetBursts[1].ActionsService; a != nil && a.Acquisitions == 0 {
		t.Error("sets offered their jobs acquired none of them")
	}
	if q := res.Bursts[0].Latency.QueuedToStarted; q.N != res.Bursts[0].Jobs {
		t.Errorf("webhook burst: queued → started measured for %d jobs, want %d", q.N, res.Bursts[0].Jobs)
	}
	var table bytes.Buffer
	printTable(&table, res)
	t.Log("\n" + table.String())
	for _, want := range []string{"S scale set vs webhook, N=4, jobs assigned", "S scale set vs webhook, N=4, jobs offered",
		"1 queued at GitHub → job started", "2 REST calls per runner lifecycle", "Actions service calls per runner lifecycle",
		"Actions service calls per job; acquisitions apart", "3 Temporal actions per runner lifecycle", "runner lifecycles per job"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func checkRunnerflowScaleSetBurst(t *testing.T, b BurstResult) {
	t.Helper()
	if b.Jobs != 4 || b.Runners < b.Jobs {
		t.Errorf("scale-set burst %q of %d jobs had %d runner lifecycles, want at least one per job", b.Mode, b.Jobs, b.Runners)
	}
	l := b.Latency
	steps := []Percentiles{l.ToPoolDecision, l.ToRunnerWorkflow, l.ToPodCreate, l.ToOnline, l.ToStarted, l.QueuedToStarted}
	for i, p := range steps {
		if p.N != b.Jobs {
			t.Errorf("step %d measured for %d jobs, want %d", i, p.N, b.Jobs)
		}
	}
	// Measured from the same queued time, each step of a job comes after the one before it.
	if !slices.IsSorted([]float64{l.ToPoolDecision.MaxMs, l.ToRunnerWorkflow.MaxMs, l.ToPodCreate.MaxMs, l.ToOnline.MaxMs, l.ToStarted.MaxMs}) ||
		l.ToStarted != l.QueuedToStarted {
		t.Errorf("latencies out of causal order, or job start not measured from its queued time: %+v", l)
	}
	for route, n := range b.GitHub.ByEndpoint {
		if strings.Contains(route, "{runner_id}") || strings.Contains(route, "generate-jitconfig") {
			t.Errorf("%d REST calls %s for scale-set runners, want none", n, route)
		}
	}
	a := b.ActionsService
	if a == nil || a.Calls != sum(a.ByEndpoint) || a.PerRunner != ratio(a.Calls, b.Runners) || a.Acquisitions > a.Calls {
		t.Fatalf("Actions service calls %+v: want counted, consistent, and calls / %d runners", a, b.Runners)
	}
	minted := 0
	for route, n := range a.ByEndpoint {
		if strings.Contains(route, "generatejitconfig 2") {
			minted += n
		}
	}
	if pods := b.Kubernetes.ByKind["create pods"]; minted < b.Jobs || minted != pods {
		t.Errorf("%d JIT configurations from the sets, %d pods created, for %d jobs: want one a pod, at least one a job", minted, pods, b.Jobs)
	}
	tc := b.Temporal
	if tc.Listeners.Runs < 2 || tc.Listeners.Actions.Total() == 0 || tc.ActionsPerRunner != ratio(tc.total().Actions.Total(), b.Runners) {
		t.Errorf("Temporal cost %+v: want both listeners counted and in the total per runner", tc)
	}
}
