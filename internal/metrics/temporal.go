// Package metrics is the plumbing around runnerflow's one Prometheus registry: it bridges the
// Temporal SDK's metrics (the SDK's own series and the workflows' replay-safe metrics) into
// that registry, and serves it with liveness and readiness on one listener. The series
// themselves are defined where they are measured: activities (GitHub, Kubernetes), the
// webhook intake and the workflows (docs/metrics.md lists them).
package metrics

import (
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// reportInterval is how often tally copies gauges and counters into the registry. A second
// keeps the pool gauges as fresh as a scrape can see them at negligible cost.
const reportInterval = time.Second

// DurationBuckets are the histogram buckets of every duration runnerflow exports, its own and
// the SDK's: from a millisecond (a Temporal request) to half an hour (a runner that waited
// for a cold node), roughly 2.5x apart.
var DurationBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
}

// labelValueCharacters keeps label values as they are (pool names contain "-", task queues
// and activity types too); the SDK's stock Prometheus options would turn "-" into "_", so a
// pool's worker-side series would not join its starter-side ones.
var labelValueCharacters = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{' ', '~'}}}

// NewTemporalHandler returns the metrics handler for Temporal clients (client.Options.
// MetricsHandler): the SDK's series and what workflows record through
// workflow.GetMetricsHandler land in reg under their own names — no prefix, counters with
// _total, timers as histograms in seconds. Create one per registry and share it between the
// clients of a process: a second one would register the same names again. Close flushes the
// last values.
func NewTemporalHandler(reg prometheus.Registerer, logger *slog.Logger) (client.MetricsHandler, io.Closer) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              reg,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: DurationBuckets,
		// The reporter's default panics; a clash of label sets must not take the worker down.
		OnRegisterError: func(err error) {
			logger.Warn("Temporal metric not registered", "error", err)
		},
	})
	sanitize := sdktally.PrometheusSanitizeOptions
	sanitize.ValueCharacters = labelValueCharacters
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, reportInterval)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer
}
