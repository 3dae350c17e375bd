package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// What a workflow records through workflow.GetMetricsHandler reaches the registry under the
// name it was given, with its tags as labels, unchanged.
func TestTemporalHandlerExportsWorkflowMetricsByTheirNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, closer := NewTemporalHandler(reg, nil)
	pool := h.WithTags(map[string]string{"pool": "org-linux"})
	pool.Gauge("runnerflow_test_runners").Update(3)
	pool.Counter("runnerflow_test_starts").Inc(2)
	pool.Timer("runnerflow_test_latency_seconds").Record(2500 * time.Millisecond)
	if err := closer.Close(); err != nil { // flushes the last values into the registry
		t.Fatal(err)
	}
	families := gather(t, reg)

	gauge := families["runnerflow_test_runners"]
	if gauge.GetType() != dto.MetricType_GAUGE || gauge.Metric[0].GetGauge().GetValue() != 3 {
		t.Errorf("gauge: %v", gauge)
	}
	if got := label(gauge.Metric[0], "pool"); got != "org-linux" {
		t.Errorf("pool label %q, want org-linux kept as is", got)
	}
	counter := families["runnerflow_test_starts_total"]
	if counter.GetType() != dto.MetricType_COUNTER || counter.Metric[0].GetCounter().GetValue() != 2 {
		t.Errorf("counter (want the _total suffix added): %v", counter)
	}
	hist := families["runnerflow_test_latency_seconds"]
	if hist.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("timer exported as %v, want a histogram", hist.GetType())
	}
	if h := hist.Metric[0].GetHistogram(); h.GetSampleSum() != 2.5 || h.GetSampleCount() != 1 || len(h.Bucket) != len(DurationBuckets) {
		t.Errorf("histogram: sum %v count %d buckets %d", h.GetSampleSum(), h.GetSampleCount(), len(h.Bucket))
	}
	problems, err := testutil.GatherAndLint(reg, "runnerflow_test_runners", "runnerflow_test_starts_total", "runnerflow_test_latency_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestHandlerServesMetricsHealthAndReadiness(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "runnerflow_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	var ready atomic.Bool
	srv, err := Listen("127.0.0.1:0", Handler(reg, func(context.Context) error {
		if !ready.Load() {
			return errors.New("workers not started")
		}
		return nil
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	base := "http://" + srv.Addr()

	expect(t, base+"/metrics", 200, "runnerflow_test_total 1")
	expect(t, base+"/healthz", 200, "ok")
	expect(t, base+"/readyz", 503, "workers not started")
	ready.Store(true)
	expect(t, base+"/readyz", 200, "ready")

	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after its context ended")
	}
}

func TestListenRefusesABusyAddress(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := Listen(srv.Addr(), http.NotFoundHandler(), nil); err == nil {
		t.Error("a second listener on a busy address")
	}
}

func expect(t *testing.T, url string, status int, body string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !strings.Contains(string(b), body) {
		t.Errorf("GET %s: %d %q, want %d containing %q", url, resp.StatusCode, b, status, body)
	}
}

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
