// Package webhooks tests the webhook path end to end in the real test world: the
// GitHub double sends signed workflow_job webhooks to the starter's intake (internal/webhook,
// served over HTTP), which feeds the scale-window workflows that update the real pool workflows,
// all run by the worker as workerapp assembles it against a real Temporal server and
// kube-apiserver.
package webhooks

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

var world *testworld.World

func TestMain(m *testing.M) {
	os.Exit(testworld.RunTests(m, testworld.WorldOptions{}, &world))
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// intake is the starter's webhook intake under test, with a GitHub double that signs its
// deliveries. The world's double is started without a webhook secret and the intake refuses
// unsigned deliveries, so the test runs its own double instance with a secret; the worker uses
// that same double, so GitHub is one place for the whole test.
type intake struct {
	t      *testing.T
	c      client.Client
	github *githubdouble.Server
	token  string
	// ns is the Kubernetes namespace the pools' runners would run in.
	ns      string
	handler *webhook.Handler
	metrics *webhook.Metrics
	server  *httptest.Server

	mu   sync.Mutex
	acks []time.Duration
}

// intakeOptions vary the intake under test.
type intakeOptions struct {
	// webhookWorkers is how many deliveries the GitHub double sends at once; zero means 8.
	webhookWorkers int
	// temporal wraps the intake's Temporal client (the test's view of what Temporal answers);
	// nil gives the intake the client itself.
	temporal func(client.Client) webhook.Temporal
}

func newIntake(t *testing.T) *intake { return newIntakeWith(t, intakeOptions{}) }

func newIntakeWith(t *testing.T, opts intakeOptions) *intake {
	t.Helper()
	if opts.webhookWorkers == 0 {
		opts.webhookWorkers = 8
	}
	c, err := client.Dial(client.Options{HostPort: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(quietLogger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	in := &intake{t: t, c: c, token: "ghp_webhookintegration", metrics: webhook.NewMetrics(prometheus.NewRegistry())}
	const secret = "burst test secret"
	in.github, err = githubdouble.Start(githubdouble.Config{
		WebhookSecret: secret, Tokens: []string{in.token}, WebhookWorkers: opts.webhookWorkers, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.github.Close)
	var temporal webhook.Temporal = c
	if opts.temporal != nil {
		temporal = opts.temporal(c)
	}
	in.handler, err = webhook.NewHandler(webhook.Config{
		Secret: []byte(secret), Temporal: temporal, Metrics: in.metrics, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	in.server = httptest.NewServer(in.timed(in.handler.Routes()))
	t.Cleanup(in.server.Close)
	in.github.SetWebhookURL(in.server.URL + "/webhook")
	in.startWorker()
	return in
}

// timed records how long the intake takes to answer each delivery.
func (in *intake) timed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		in.mu.Lock()
		in.acks = append(in.acks, time.Since(start))
		in.mu.Unlock()
	})
}

// ackPercentile returns the p-th percentile of the recorded answer times.
func (in *intake) ackPercentile(p float64) (time.Duration, int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.acks) == 0 {
		return 0, 0
	}
	sorted := slices.Clone(in.acks)
	slices.Sort(sorted)
	i := int(p/100*float64(len(sorted)) + 0.5)
	return sorted[min(max(i-1, 0), len(sorted)-1)], len(sorted)
}

func (in *intake) startWorker() {
	in.ns = world.Kube.NewNamespace(in.t)
	app, err := workerapp.New(workerapp.Config{
		TemporalAddress: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Kube: world.Kube.Config, WatchNamespace: in.ns,
		GitHub: activities.GitHubConfig{BaseURL: in.github.URL(), Token: in.token},
		Logger: quietLogger(),
	})
	if err != nil {
		in.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	in.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			in.t.Errorf("worker: %v", err)
		}
	})
}
