package metrics

import (
	"regexp"
	"slices"
	"strings"
)

// DocumentedSeries is one row of the metrics table in docs/metrics.md: the series' type and its
// labels (sorted).
type DocumentedSeries struct {
	Kind   string
	Labels []string
}

// docRow matches a table row: | `runnerflow_name` | gauge | `label`, `label` | meaning |
var docRow = regexp.MustCompile("^\\| `(runnerflow_[a-z0-9_]+)` \\| (gauge|counter|histogram) \\| ([^|]*)\\|")

// ParseDoc reads the metrics table of docs/metrics.md, the one list of runnerflow's series that
// the dashboard test and the whole-system metrics test hold the code and the dashboard to.
func ParseDoc(markdown []byte) map[string]DocumentedSeries {
	out := map[string]DocumentedSeries{}
	for _, line := range strings.Split(string(markdown), "\n") {
		m := docRow.FindStringSubmatch(line)
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
		out[m[1]] = DocumentedSeries{Kind: m[2], Labels: labels}
	}
	return out
}
