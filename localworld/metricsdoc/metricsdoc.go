// Package metricsdoc reads the metrics table of docs/metrics.md, the one list of runnerflow's
// series. It is test tooling: the dashboard test (deploy/) and the whole-system metrics test
// (localworld/demo) hold the dashboard and the binaries to this list.
package metricsdoc

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Series is one row of the table: the series' type and its labels (sorted).
type Series struct {
	Kind   string
	Labels []string
}

// row matches a table row: | `runnerflow_name` | gauge | `label`, `label` | meaning |
var row = regexp.MustCompile("^\\| `(runnerflow_[a-z0-9_]+)` \\| (gauge|counter|histogram) \\| ([^|]*)\\|")

// Parse returns the table's series by name; lines that are not rows of runnerflow series are
// skipped.
func Parse(markdown []byte) map[string]Series {
	out := map[string]Series{}
	for _, line := range strings.Split(string(markdown), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out[m[1]] = Series{Kind: m[2], Labels: labels}
	}
	return out
}

// Read parses the file at path (docs/metrics.md, relative to the calling test's folder) and
// fails the test when it cannot be read or lists no series.
func Read(t testing.TB, path string) map[string]Series {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := Parse(data)
	if len(out) == 0 {
		t.Fatalf("%s lists no runnerflow_ series", path)
	}
	return out
}
