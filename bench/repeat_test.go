package main

import (
	"testing"
)

// The spread lines up each burst across the runs by flow and size, whatever the runs' order
// of phases, and takes min, median and max of each figure.
func TestSpreadLinesUpBurstsAcrossRuns(t *testing.T) {
	burst := func(mode string, jobs int, allStarted float64, answered503 int) BurstResult {
		return BurstResult{Mode: mode, Jobs: jobs, Runners: jobs, Latency: LatencyResult{AllStartedSeconds: allStarted},
			Operator: OperatorResult{Answered503: answered503}}
	}
	runs := []Results{
		{Bursts: []BurstResult{burst("", 500, 30, 4)}, ScaleSetBursts: []BurstResult{burst("scaleset", 500, 50, 0)}},
		{Bursts: []BurstResult{burst("", 500, 10, 0)}},
		{Bursts: []BurstResult{burst("", 500, 20, 9)}, ScaleSetBursts: []BurstResult{burst("scaleset", 500, 70, 0)}},
	}
	got := map[string]SpreadItem{}
	for _, it := range spreadOf(runs) {
		got[it.Burst+"/"+it.Figure] = it
	}
	for key, want := range map[string]SpreadItem{
		"webhooks N=500/all jobs started (s)":      {Runs: 3, Min: 10, Median: 20, Max: 30},
		"webhooks N=500/deliveries answered 503":   {Runs: 3, Min: 0, Median: 4, Max: 9},
		"scaleset N=500/all jobs started (s)":      {Runs: 2, Min: 50, Median: 60, Max: 70},
		"webhooks N=500/runner lifecycles per job": {Runs: 3, Min: 1, Median: 1, Max: 1},
	} {
		it, ok := got[key]
		if !ok {
			t.Errorf("no spread for %s", key)
			continue
		}
		if it.Runs != want.Runs || it.Min != want.Min || it.Median != want.Median || it.Max != want.Max {
			t.Errorf("%s: %+v, want runs %d, min %g, median %g, max %g", key, it, want.Runs, want.Min, want.Median, want.Max)
		}
	}
}

func TestRepeatMustBePositive(t *testing.T) {
	if _, _, err := parseFlags([]string{"--repeat", "0"}, discard{}); err == nil {
		t.Error("--repeat 0 accepted")
	}
	opts, _, err := parseFlags([]string{"--repeat", "5"}, discard{})
	if err != nil || opts.Repeat != 5 {
		t.Errorf("--repeat 5: %+v, %v", opts.Repeat, err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
