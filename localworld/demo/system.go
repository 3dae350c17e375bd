// Package demo runs runnerflow end to end on one machine: the test world (Temporal dev server
// with its Web UI, a real kube-apiserver, the GitHub double, the runner simulator), the worker
// and the starter's webhook intake in-process, two example pools, and a burst of jobs. It is
// what `make demo` shows a newcomer, and its test is the proof that the whole runs.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/metrics"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// RunnerNamespace is where the demo's pools put their runners (pools.yaml says so too).
const RunnerNamespace = "runnerflow"

// SystemConfig configures Start.
type SystemConfig struct {
	// UI turns the Temporal Web UI on.
	UI bool
	// WorkDuration is how long a simulated job runs; zero means the simulator's default.
	WorkDuration time.Duration
	// MetricsListen is where the worker serves /metrics (the one registry, with the starter's
	// series too); empty means a free loopback port.
	MetricsListen string
	// Logger receives the worker's, the intake's and the world's logs; nil discards them.
	Logger *slog.Logger
}

// System is runnerflow running against the test world, wired as in production: the worker
// (workerapp) with the GitHub double's URL and a token, the starter's webhook intake
// (internal/webhook) on a loopback port that the double delivers to, signed with a secret both
// share, and one Prometheus registry holding every series, the SDK's included.
type System struct {
	World    *testworld.World
	Temporal client.Client
	Registry *prometheus.Registry
	Intake   *webhook.Handler
	// IntakeURL is where the double delivers webhooks; MetricsURL serves /metrics.
	IntakeURL  string
	MetricsURL string

	latencies *sampler
	flush     io.Closer
	cancel    context.CancelFunc
	done      []chan error
}

// Start brings the whole system up and returns once the worker runs and the intake listens.
// Stop ends it.
func Start(ctx context.Context, cfg SystemConfig) (_ *System, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MetricsListen == "" {
		cfg.MetricsListen = "127.0.0.1:0"
	}
	secret, err := newSecret()
	if err != nil {
		return nil, err
	}
	s := &System{Registry: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	s.World, err = testworld.StartWorld(ctx, testworld.WorldOptions{
		UI: cfg.UI, Logger: cfg.Logger, WorkDuration: cfg.WorkDuration, WebhookSecret: secret,
	})
	if err != nil {
		return nil, err
	}
	if err := createNamespace(ctx, s.World); err != nil {
		return nil, err
	}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sdk, flush := metrics.NewTemporalHandler(s.Registry, cfg.Logger)
	s.flush, s.latencies = flush, newSampler(sdk)
	s.Temporal, err = client.Dial(client.Options{
		HostPort: s.World.Temporal.Address, Namespace: s.World.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(cfg.Logger), MetricsHandler: sdk,
	})
	if err != nil {
		return nil, fmt.Errorf("dial temporal: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := s.startWorker(runCtx, cfg); err != nil {
		return nil, err
	}
	if err := s.startIntake(runCtx, cfg, []byte(secret)); err != nil {
		return nil, err
	}
	return s, nil
}

// startWorker runs the worker in-process, as the worker binary assembles it.
func (s *System) startWorker(ctx context.Context, cfg SystemConfig) error {
	wcfg := workerapp.Config{
		TemporalAddress: s.World.Temporal.Address, Namespace: s.World.Temporal.Namespace,
		Kube: s.World.Kube.Config, WatchNamespace: RunnerNamespace, Logger: cfg.Logger,
		Metrics: s.Registry, TemporalMetrics: s.latencies, MetricsListen: cfg.MetricsListen,
		StopTimeout: 2 * time.Second,
	}
	wcfg.GitHub.BaseURL, wcfg.GitHub.Token = s.World.GitHub.URL(), s.World.GitHubToken
	app, err := workerapp.New(wcfg)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	s.MetricsURL = "http://" + app.MetricsAddr() + "/metrics"
	s.goRun(func() error { return app.Run(ctx) })
	return nil
}

// startIntake serves the starter's webhook intake on a loopback port and points the GitHub
// double's webhook at it.
func (s *System) startIntake(ctx context.Context, cfg SystemConfig, secret []byte) error {
	h, err := webhook.NewHandler(webhook.Config{
		Secret: secret, Temporal: s.Temporal, Logger: cfg.Logger, Metrics: webhook.NewMetrics(s.Registry),
	})
	if err != nil {
		return err
	}
	s.Intake = h
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	srv := &http.Server{Handler: h.Routes(), ReadHeaderTimeout: 10 * time.Second}
	s.IntakeURL = "http://" + ln.Addr().String() + "/webhook"
	s.World.GitHub.SetWebhookURL(s.IntakeURL)
	s.goRun(func() error {
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	s.goRun(func() error { h.Pools().Run(ctx); return nil })
	return nil
}

func (s *System) goRun(f func() error) {
	done := make(chan error, 1)
	s.done = append(s.done, done)
	go func() { done <- f() }()
}

// Stop ends the worker, the intake and the world, and reports nothing: a demo that is
// stopping has nothing left to do about a failure.
func (s *System) Stop() {
	if s.cancel != nil {
		s.cancel()
		for _, d := range s.done {
			<-d
		}
	}
	if s.Temporal != nil {
		s.Temporal.Close()
	}
	if s.flush != nil {
		_ = s.flush.Close()
	}
	if s.World != nil {
		s.World.Stop()
	}
}

// createNamespace makes the runners' namespace, which a cluster's administrator would.
func createNamespace(ctx context.Context, w *testworld.World) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RunnerNamespace}}
	_, err := w.Kubernetes.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", RunnerNamespace, err)
	}
	return nil
}

// newSecret is a fresh webhook secret, as `openssl rand -hex 32` would make.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
