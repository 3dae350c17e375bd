package testworld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

// WorldOptions configures the local test world.
type WorldOptions struct {
	// Dir holds the servers' data and logs; empty means a new temporary directory, removed by Stop.
	Dir string
	// UI turns on the Temporal Web UI (the demo wants it).
	UI bool
	// Logger receives the double's and the simulator's logs; nil discards them.
	Logger *slog.Logger
	// WorkDuration is how long a simulated job takes; zero means the simulator's default.
	WorkDuration time.Duration
	// JobWork, when set, is how long one job takes by its id, where it answers above zero
	// (simulator.Config.JobWork).
	JobWork func(jobID int64) time.Duration
	// GitHubRateLimit is the double's request budget per token per hour; zero means GitHub's 5000.
	GitHubRateLimit int
	// GitHubPointsPerMinute is the double's secondary rate limit per token: points a rolling
	// minute (a read costs 1, a write 5); zero means GitHub's 900, negative switches it off.
	GitHubPointsPerMinute int
	// WebhookSecret signs the double's webhook deliveries; empty sends them unsigned (the
	// starter's intake refuses those, so a world that feeds the intake sets one).
	WebhookSecret string
	// ScaleSetJobOffersFor chooses the scale sets the double offers jobs to (GHES's flow)
	// rather than assigns them (github.com's); nil assigns every set's jobs.
	ScaleSetJobOffersFor func(githubdouble.ScaleSetKey) bool
	// ScaleSetNameOnlyLabelsFor chooses the scale sets that keep only their name as their
	// label (GHES without custom scale-set labels); nil keeps every set's labels.
	ScaleSetNameOnlyLabelsFor func(githubdouble.ScaleSetKey) bool
}

// World is the local test world: a real Temporal server, a real kube-apiserver with etcd and
// kube-controller-manager's garbage collector, the GitHub double and the runner simulator that
// plays kubelet and actions runner for runnerflow's pods. Tests and the demo run runnerflow's
// worker and starter against it.
type World struct {
	Temporal   *Temporal
	Kube       *Kube
	Kubernetes kubernetes.Interface
	GitHub     *githubdouble.Server
	// GitHubToken is a personal access token the double accepts.
	GitHubToken string
	// WebhookSecret signs the double's webhook deliveries; give it to the starter.
	WebhookSecret string
	Simulator     *simulator.Simulator

	dir       string
	removeDir bool
	cancel    context.CancelFunc
	simDone   chan error
}

// StartWorld starts every part of the world and returns once all are ready. Call Stop when done.
func StartWorld(ctx context.Context, opts WorldOptions) (*World, error) {
	w := &World{dir: opts.Dir}
	if err := w.start(ctx, opts); err != nil {
		w.Stop() // whatever did start
		return nil, err
	}
	return w, nil
}

func (w *World) start(ctx context.Context, opts WorldOptions) (err error) {
	if w.dir == "" {
		if w.dir, err = os.MkdirTemp("", "runnerflow-world-"); err != nil {
			return err
		}
		w.removeDir = true
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err = w.startServers(ctx, opts); err != nil {
		return err
	}
	if err = w.startGitHub(opts, logger); err != nil {
		return err
	}
	w.startSimulator(opts, logger)
	return nil
}

func (w *World) startServers(ctx context.Context, opts WorldOptions) (err error) {
	w.Temporal, err = StartTemporal(ctx, TemporalOptions{
		Dir:              filepath.Join(w.dir, "temporal"),
		UI:               opts.UI,
		SearchAttributes: workflows.SearchAttributeTypes(),
	})
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	if w.Kube, err = StartKube(ctx, filepath.Join(w.dir, "kube")); err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	// A runner's pod is owned by its Secret and goes with it through the garbage collector,
	// as in any real cluster: the world runs the real one.
	if err := w.Kube.StartGarbageCollector(ctx); err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	if w.Kubernetes, err = kubernetes.NewForConfig(w.Kube.Config); err != nil {
		return err
	}
	return nil
}

func (w *World) startGitHub(opts WorldOptions, logger *slog.Logger) (err error) {
	w.GitHubToken = "ghp_" + randomHex(18)
	w.GitHub, err = githubdouble.Start(githubdouble.Config{
		Tokens:                    []string{w.GitHubToken},
		RateLimit:                 opts.GitHubRateLimit,
		SecondaryPointsPerMinute:  opts.GitHubPointsPerMinute,
		WebhookSecret:             opts.WebhookSecret,
		ScaleSetJobOffersFor:      opts.ScaleSetJobOffersFor,
		ScaleSetNameOnlyLabelsFor: opts.ScaleSetNameOnlyLabelsFor,
		Logger:                    logger.With("part", "github-double"),
	})
	if err != nil {
		return fmt.Errorf("github double: %w", err)
	}
	return nil
}

func (w *World) startSimulator(opts WorldOptions, logger *slog.Logger) {
	w.Simulator = simulator.New(simulator.Config{
		Client:       w.Kubernetes,
		GitHub:       githubdouble.NewRunnerClient(w.GitHub.URL()),
		WorkDuration: opts.WorkDuration,
		JobWork:      opts.JobWork,
		Logger:       logger.With("part", "simulator"),
	})
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.simDone = make(chan error, 1)
	go func() { w.simDone <- w.Simulator.Run(ctx) }()
}

// Stop stops every part that was started, in reverse order, and removes a temporary directory.
func (w *World) Stop() {
	if w.cancel != nil {
		w.cancel()
		if err := <-w.simDone; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "testworld: simulator: %v\n", err)
		}
		w.cancel = nil
	}
	if w.GitHub != nil {
		w.GitHub.Close()
	}
	if w.Kube != nil {
		_ = w.Kube.Stop()
	}
	if w.Temporal != nil {
		_ = w.Temporal.Stop()
	}
	if w.removeDir {
		_ = os.RemoveAll(w.dir)
		w.removeDir = false
	}
}

// Dir is where the world keeps its data and logs.
func (w *World) Dir() string { return w.dir }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
