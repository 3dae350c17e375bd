package workerapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
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
	// pprof serves the runtime profiles when Config.PprofListen asks for them.
	pprof *metrics.Server
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

// listenPprof binds the profile listener when one is configured; like listen, a busy port
// fails New rather than Run.
func (o *observability) listenPprof(cfg Config) error {
	if cfg.PprofListen == "" {
		return nil
	}
	srv, err := metrics.Listen(cfg.PprofListen, pprofHandler(), cfg.Logger)
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	o.pprof = srv
	return nil
}

// pprofHandler serves net/http/pprof's pages on a mux of its own: importing the package
// registers them on http.DefaultServeMux too, which nothing here serves.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // heap, goroutine, allocs, … by name
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// namedServer is a listener Run serves, with the name its errors carry.
type namedServer struct {
	name   string
	server *metrics.Server
}

// listeners are the HTTP listeners that New bound.
func (o *observability) listeners() []namedServer {
	var out []namedServer
	if o.server != nil {
		out = append(out, namedServer{"metrics", o.server})
	}
	if o.pprof != nil {
		out = append(out, namedServer{"pprof", o.pprof})
	}
	return out
}

func (o *observability) close() {
	o.started.Store(false)
	for _, l := range o.listeners() {
		_ = l.server.Close()
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

// PprofAddr is the address the runtime profiles are served on, empty without
// Config.PprofListen.
func (a *App) PprofAddr() string {
	if a.obs.pprof == nil {
		return ""
	}
	return a.obs.pprof.Addr()
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
