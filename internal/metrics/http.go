package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check: a probe must answer within its own timeout.
const readyTimeout = 2 * time.Second

// Handler serves /metrics from g, /healthz (Healthz) and /readyz (Readyz of ready). Both
// binaries serve it on their metrics listener.
func Handler(g prometheus.Gatherer, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", Healthz)
	mux.Handle("GET /readyz", Readyz(ready))
	return mux
}

// Healthz answers liveness: the process serves HTTP.
func Healthz(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }

// Readyz answers readiness: 200 while ready returns nil, else 503 with its error in the body.
// One check gets readyTimeout, within a probe's own timeout.
func Readyz(ready func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}

// Server is an HTTP listener for Handler. Listen binds at once, so a port in use fails at
// start and a ":0" address can be read back before serving.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr for h.
func Listen(addr string, h http.Handler, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{ln: ln, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}, nil
}

// Addr is the bound address (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx ends, then shuts down, letting a scrape in flight finish.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// Close releases the listener of a Server that never served.
func (s *Server) Close() error { return s.ln.Close() }
