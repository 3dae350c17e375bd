package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFileJobIDOfAMatrixJob(t *testing.T) {
	for name, want := range map[string]string{"build": "build", "deploy (a)": "deploy", "deploy (a, linux)": "deploy", "": ""} {
		if got := fileJobID(name); got != want {
			t.Errorf("fileJobID(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestPipelinesPhaseRunsEndToEnd runs the pipelines phase with one measured run per pool in
// the real test world. Each pool gives each of the run's 7 jobs a runner of its own; the jobs
// run their drawn times (the simulator's 1 s otherwise); only the predicting pool reads the
// run's graph, in one or two calls. It never judges speed.
func TestPipelinesPhaseRunsEndToEnd(t *testing.T) {
	opts := Options{
		Jobs: []int{1}, Skip: []string{"burst", "throughput", "memory"}, Pipelines: 1, PipelineSeed: 7,
		Rate: 1, LoadDuration: time.Second, JobDuration: time.Second, PhaseTimeout: 10 * time.Minute,
		GitHubBudget: 1_000_000, GitHubPointsPerMinute: 900, LogPath: filepath.Join(t.TempDir(), "bench.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := run(ctx, opts, &progress)
	t.Log("\n" + progress.String())
	if err != nil || len(res.Failures) > 0 || res.Pipelines == nil {
		t.Fatalf("run: %v; failed phases: %q; pipelines %v", err, res.Failures, res.Pipelines)
	}
	p := res.Pipelines
	// The drawn times of one run's jobs (lint, test, build and four deploys) add up to
	// between 0.75 and 1.25 of their typical times, give or take GitHub's whole seconds.
	typical := 0.0
	for id, d := range pipelineJobTimes {
		n := 1.0
		if id == "deploy" {
			n = 4
		}
		typical += n * d.Seconds()
	}
	for _, a := range []PipelineArm{p.On, p.Off} {
		if a.Jobs != 7 || a.RunnersStarted != a.Jobs || a.Downstream.N != 5 || a.Upstream.N != 2 {
			t.Errorf("%s: %d jobs (%d downstream, %d upstream) on %d runners, want 7 (5, 2) on one runner each", a.Pool, a.Jobs, a.Downstream.N, a.Upstream.N, a.RunnersStarted)
		}
		if a.JobSeconds < 0.75*typical-7 || a.JobSeconds > 1.25*typical+7 {
			t.Errorf("%s: the jobs ran %.0f s, want their drawn times (%.0f s typical, ±25%%)", a.Pool, a.JobSeconds, typical)
		}
		if a.RunnerSeconds < a.JobSeconds {
			t.Errorf("%s: %.0f runner-s for %.0f job-s: a runner lives at least its job", a.Pool, a.RunnerSeconds, a.JobSeconds)
		}
	}
	if !p.On.Prewarm || p.Off.Prewarm || p.On.GitHubCallsPerRun < 1 || p.On.GitHubCallsPerRun > 2 {
		t.Errorf("prewarm on %v, off %v, %.1f graph reads per run: want the predicting pool to read each run's graph once (1 or 2 calls)",
			p.On.Prewarm, p.Off.Prewarm, p.On.GitHubCallsPerRun)
	}
	var table bytes.Buffer
	printTable(&table, res)
	for _, want := range []string{"P pipelines, 1 runs, prediction on", "prediction off", "GitHub reads of runs and workflow files"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}
