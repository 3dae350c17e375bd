package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/runnerflow/runnerflow/internal/metrics"
	"github.com/runnerflow/runnerflow/internal/temporalconn"
	"github.com/runnerflow/runnerflow/internal/webhook"
)

// serveFlags are `starter serve`'s settings.
type serveFlags struct {
	listen        string
	metricsListen string
	temporal      temporalconn.Config
	secretFile    string
	window        time.Duration
}

func parseServeFlags(args []string, out io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&f.listen, "listen", ":8080", "address of the webhook listener (POST /webhook, /healthz, /readyz)")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":9090", "address of the metrics listener (/metrics, /healthz, /readyz); empty turns it off")
	f.temporal.RegisterFlags(fs)
	fs.StringVar(&f.secretFile, "webhook-secret-file", "", "file holding the GitHub webhook secret (default: $GITHUB_WEBHOOK_SECRET)")
	fs.DurationVar(&f.window, "scale-window", 0, "how long a scale window collects events (0: the workflow default, 3s)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	return f, nil
}

// webhookSecret reads the secret from the file, else from GITHUB_WEBHOOK_SECRET. There is no
// default: without a secret anyone could make runnerflow start runners.
func webhookSecret(file string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		// Secrets written with echo end in a newline GitHub's copy does not have.
		secret := strings.TrimRight(string(b), "\r\n")
		if secret == "" {
			return nil, fmt.Errorf("webhook secret file %s is empty", file)
		}
		return []byte(secret), nil
	}
	if s := os.Getenv("GITHUB_WEBHOOK_SECRET"); s != "" {
		return []byte(s), nil
	}
	return nil, errors.New("no webhook secret: set GITHUB_WEBHOOK_SECRET or --webhook-secret-file (refusing to accept unsigned webhooks)")
}

// runServe is `starter serve`: the webhook intake until ctx ends. It starts even while Temporal
// is down (deliveries then get 503 and /readyz says so), so a restart of Temporal never needs a
// restart of the starter.
func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	f, err := parseServeFlags(args, stdout)
	if err != nil {
		return err
	}
	secret, err := webhookSecret(f.secretFile)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	opts, err := f.temporal.ClientOptions()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sdkMetrics, flush := metrics.NewTemporalHandler(reg, logger)
	defer flush.Close()
	opts.Logger, opts.MetricsHandler = tlog.NewStructuredLogger(logger), sdkMetrics
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return fmt.Errorf("temporal client for %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	h, err := webhook.NewHandler(webhook.Config{
		Secret: secret, Temporal: c, Logger: logger, Metrics: webhook.NewMetrics(reg), Window: f.window,
	})
	if err != nil {
		return err
	}
	go h.Pools().Run(ctx)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	var metricsServer *metrics.Server
	if f.metricsListen != "" {
		// The same listener as the worker's: /metrics, /healthz and /readyz.
		if metricsServer, err = metrics.Listen(f.metricsListen, metrics.Handler(reg, h.Ready), logger); err != nil {
			ln.Close()
			return err
		}
		fmt.Fprintf(stdout, "metrics listening on %s\n", metricsServer.Addr())
	}
	fmt.Fprintf(stdout, "webhook listening on %s\n", ln.Addr())
	return serve(ctx, ln, webhookServer(h.Routes(), logger), metricsServer)
}

// webhookServer is the HTTP server of the webhook listener.
func webhookServer(routes http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           routes,
		ReadHeaderTimeout: 10 * time.Second,
		// A 25 MB delivery over a slow link still fits; GitHub gives up after 10 s anyway.
		ReadTimeout:  time.Minute,
		WriteTimeout: time.Minute,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// serve runs the webhook server on ln and the metrics server (when there is one) until ctx ends
// or one of them fails, then shuts both down, letting deliveries in flight finish.
func serve(ctx context.Context, ln net.Listener, hooks *http.Server, metricsServer *metrics.Server) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- hooks.Serve(ln) }()
	var wg sync.WaitGroup
	if metricsServer != nil {
		wg.Go(func() {
			if err := metricsServer.Serve(ctx); err != nil {
				errc <- err
			}
		})
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_ = hooks.Shutdown(shutdownCtx)
	wg.Wait()
	return err
}
