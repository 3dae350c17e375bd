package workerapp

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/metrics"
)

// observability is what the App exports about itself: the activities' series, the SDK's
// metrics handler it made (and must flush), and the /metrics, /healthz, /readyz listener.
type observability struct {
	activities *activities.Metrics
	ownHandler io.Closer
	server     *metrics.Server
	// started is true while the workers run: /readyz says no before and after.
	started atomic.Bool
}

// init creates the worker's series in cfg.Metrics and wraps the GitHub transport to count
// requests; it fills in cfg.TemporalMetrics when the caller left it to the App.
func (o *observability) init(cfg *Config) {
	if cfg.Metrics == nil {
		return
	}
	o.activities = activities.NewMetrics(cfg.Metrics)
	cfg.GitHub.Transport = o.activities.GitHubTransport(cfg.GitHub.Transport)
	if cfg.TemporalMetrics == nil && cfg.Client == nil {
		cfg.TemporalMetrics, o.ownHandler = metrics.NewTemporalHandler(cfg.Metrics, cfg.Logger)
	}
}

// listen binds the metrics listener, so a busy port fails New rather than Run.
func (o *observability) listen(cfg Config, ready func(context.Context) error) error {
	if cfg.MetricsListen == "" {
		return nil
	}
	if cfg.Metrics == nil {
		return errors.New("a metrics listener needs a registry (Config.Metrics)")
	}
	srv, err := metrics.Listen(cfg.MetricsListen, metrics.Handler(cfg.Metrics, ready), cfg.Logger)
	if err != nil {
		return err
	}
	o.server = srv
	return nil
}

func (o *observability) close() {
	o.started.Store(false)
	if o.server != nil {
		_ = o.server.Close()
	}
	if o.ownHandler != nil {
		_ = o.ownHandler.Close()
		o.ownHandler = nil
	}
}

// MetricsAddr is the address /metrics is served on, empty without Config.MetricsListen.
func (a *App) MetricsAddr() string {
	if a.obs.server == nil {
		return ""
	}
	return a.obs.server.Addr()
}

// Ready reports whether the App is doing its work: its workers are polling and Temporal
// answers. A worker that cannot reach Temporal takes no tasks, so it should not count as
// ready (it stays alive: /healthz is separate, and the SDK reconnects by itself).
func (a *App) Ready(ctx context.Context) error {
	if !a.obs.started.Load() {
		return errors.New("workers not running")
	}
	if _, err := a.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return errors.New("temporal unreachable")
	}
	return nil
}
