package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Repeated are the results of --repeat runs of the same benchmark, one after the other, and
// the spread of each burst's operator figures across them: one run's figure is an anecdote on
// a shared machine, the spread is what an operator should expect.
type Repeated struct {
	Runs   []Results    `json:"runs"`
	Spread []SpreadItem `json:"spread"`
}

// SpreadItem is one figure of one burst over the runs that measured it.
type SpreadItem struct {
	Burst  string  `json:"burst"`
	Figure string  `json:"figure"`
	Runs   int     `json:"runs"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// spreadFigures are the figures --repeat spreads, each read from one burst's result.
var spreadFigures = []struct {
	name string
	of   func(BurstResult) float64
}{
	{"all jobs started (s)", func(b BurstResult) float64 { return b.Latency.AllStartedSeconds }},
	{"queued → job started p50 (s)", func(b BurstResult) float64 { return b.Latency.QueuedToStarted.P50ms / 1000 }},
	{"queued → job started p95 (s)", func(b BurstResult) float64 { return b.Latency.QueuedToStarted.P95ms / 1000 }},
	{"→ pool decided p50 (s)", func(b BurstResult) float64 { return b.Latency.ToPoolDecision.P50ms / 1000 }},
	{"→ pool decided p99 (s)", func(b BurstResult) float64 { return b.Latency.ToPoolDecision.P99ms / 1000 }},
	{"→ pool decided max (s)", func(b BurstResult) float64 { return b.Latency.ToPoolDecision.MaxMs / 1000 }},
	{"status query p99 (s)", func(b BurstResult) float64 { return b.Operator.StatusQuery.P99ms / 1000 }},
	{"status query max (s)", func(b BurstResult) float64 { return b.Operator.StatusQuery.MaxMs / 1000 }},
	{"deliveries answered 503", func(b BurstResult) float64 { return float64(b.Operator.Answered503) }},
	{"runner lifecycles per job", func(b BurstResult) float64 { return ratio(b.Runners, b.Jobs) }},
}

// spreadOf lines up the runs' bursts by their name and spreads each figure.
func spreadOf(runs []Results) []SpreadItem {
	var names []string
	byName := map[string][]BurstResult{}
	for _, r := range runs {
		for _, b := range slices.Concat(r.Bursts, r.ScaleSetBursts) {
			name := burstName(b)
			if _, seen := byName[name]; !seen {
				names = append(names, name)
			}
			byName[name] = append(byName[name], b)
		}
	}
	var out []SpreadItem
	for _, name := range names {
		for _, f := range spreadFigures {
			var vals []float64
			for _, b := range byName[name] {
				vals = append(vals, f.of(b))
			}
			slices.Sort(vals)
			out = append(out, SpreadItem{Burst: name, Figure: f.name, Runs: len(vals),
				Min: vals[0], Median: median(vals), Max: vals[len(vals)-1]})
		}
	}
	return out
}

// burstName names a burst by its flow and size, e.g. "webhooks N=500".
func burstName(b BurstResult) string {
	flow := "webhooks"
	if b.Mode != "" {
		flow = b.Mode
	}
	return fmt.Sprintf("%s N=%d", flow, b.Jobs)
}

// median of sorted values; the mean of the middle two for an even count.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// printSpread renders the spread table.
func printSpread(w io.Writer, items []SpreadItem) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BURST\tFIGURE\tRUNS\tMIN\tMEDIAN\tMAX")
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\n", it.Burst, it.Figure, it.Runs, it.Min, it.Median, it.Max)
	}
	_ = tw.Flush()
}
