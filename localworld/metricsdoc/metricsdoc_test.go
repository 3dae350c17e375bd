package metricsdoc

import (
	"slices"
	"testing"
)

func TestParseDocReadsTableRowsOnly(t *testing.T) {
	doc := Parse([]byte("# Metrics\n" +
		"| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n" +
		"| `runnerflow_pool_runners` | gauge | `state`, `pool` | runners by state |\n" +
		"| `runnerflow_github_rate_limit_remaining` | gauge | | budget left |\n" +
		"| `go_goroutines` | gauge | | not ours |\n"))
	if len(doc) != 2 {
		t.Fatalf("want the 2 runnerflow rows, got %v", doc)
	}
	if got := doc["runnerflow_pool_runners"]; got.Kind != "gauge" || !slices.Equal(got.Labels, []string{"pool", "state"}) {
		t.Errorf("runnerflow_pool_runners: %+v, want gauge with sorted labels pool, state", got)
	}
	if got := doc["runnerflow_github_rate_limit_remaining"]; len(got.Labels) != 0 {
		t.Errorf("a series without labels got %v", got.Labels)
	}
}
