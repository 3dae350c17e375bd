package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/runnerflow/runnerflow/localworld/metricsdoc"
)

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("grafana/runnerflow-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	return d
}

var (
	seriesName = regexp.MustCompile(`runnerflow_[a-z0-9_]+`)
	// selector matches a metric with its label matchers; byClause an aggregation's labels.
	selector = regexp.MustCompile(`(runnerflow_[a-z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	byClause = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// documentedName maps a series in a query to its documented metric: histograms are queried
// through their _bucket, _sum and _count series.
func documentedName(series string, doc map[string]metricsdoc.Series) (string, bool) {
	if _, ok := doc[series]; ok {
		return series, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && doc[base].Kind == "histogram" {
			return base, true
		}
	}
	return "", false
}

// Every documented metric has a panel, and every panel queries documented metrics by
// documented labels only, so the dashboard and docs/metrics.md cannot drift apart.
func TestDashboardShowsEveryDocumentedMetricByItsLabels(t *testing.T) {
	doc := metricsdoc.Read(t, "../docs/metrics.md")
	d := readDashboard(t)
	shown := map[string]bool{}
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			labels := []string{"le"}
			for _, s := range seriesName.FindAllString(target.Expr, -1) {
				name, ok := documentedName(s, doc)
				if !ok {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not list", p.Title, s)
					continue
				}
				shown[name] = true
				labels = append(labels, doc[name].Labels...)
			}
			for _, m := range selector.FindAllStringSubmatch(target.Expr, -1) {
				name, _ := documentedName(m[1], doc)
				for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
					if !slices.Contains(doc[name].Labels, lm[1]) && !(lm[1] == "le" && name != m[1]) {
						t.Errorf("panel %q selects %s by label %q, which docs/metrics.md does not give it", p.Title, m[1], lm[1])
					}
				}
			}
			for _, by := range byClause.FindAllStringSubmatch(target.Expr, -1) {
				for _, l := range strings.Split(by[1], ",") {
					if l = strings.TrimSpace(l); !slices.Contains(labels, l) {
						t.Errorf("panel %q aggregates by %q, a label none of its metrics has", p.Title, l)
					}
				}
			}
		}
	}
	for name := range doc {
		if !shown[name] {
			t.Errorf("%s is documented but no dashboard panel shows it", name)
		}
	}
}

// The dashboard is well-formed for Grafana: unique panel ids, panels inside the 24-column grid
// and not overlapping, every query panel on the datasource variable so an imported dashboard
// works with any Prometheus.
func TestDashboardLayoutAndDatasource(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title (provisioning keys it by uid)")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["pool"] != "query" {
		t.Errorf("template variables %v: want a datasource variable and a pool query variable", vars)
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	used := map[cell]string{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q at %+v does not fit the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[cell{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at column %d, row %d", other, p.Title, x, y)
				}
				used[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable", p.Title)
		}
	}
}
