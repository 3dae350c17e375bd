package main

import (
	"math"
	"slices"
	"time"
)

// Percentiles summarises a sample of durations, in milliseconds so the JSON reads without a
// unit conversion.
type Percentiles struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50Ms"`
	P95ms float64 `json:"p95Ms"`
	P99ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// summarize returns the nearest-rank percentiles of a sample; an empty sample gives N = 0.
func summarize(sample []time.Duration) Percentiles {
	if len(sample) == 0 {
		return Percentiles{}
	}
	sorted := slices.Clone(sample)
	slices.Sort(sorted)
	return Percentiles{
		N:     len(sorted),
		P50ms: ms(nearestRank(sorted, 50)),
		P95ms: ms(nearestRank(sorted, 95)),
		P99ms: ms(nearestRank(sorted, 99)),
		MaxMs: ms(sorted[len(sorted)-1]),
	}
}

// nearestRank is the smallest value with at least p percent of the sample at or below it.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ms is d in milliseconds, rounded to a tenth.
func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

// ratio is a/b rounded to two decimals, 0 when b is 0 (nothing to divide by is reported as
// such by the counts next to it).
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(float64(a)/float64(b)*100) / 100
}
