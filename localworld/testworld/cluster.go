package testworld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
)

// Cluster is one more Kubernetes cluster beside the world's own: a kube-apiserver with an etcd
// of its own, its garbage collector, and a runner simulator of its own playing kubelet there
// against the world's GitHub double. Only the tests of several clusters start one (it costs
// the start of a second API server); Stop ends it.
type Cluster struct {
	Name       string
	Kube       *Kube
	Kubernetes kubernetes.Interface
	Simulator  *simulator.Simulator

	cancel  context.CancelFunc
	simDone chan error
}

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Name names the cluster (its data directory; tests use it as the runnerflow cluster name).
	Name string
	// WorkDuration is how long a simulated job takes; zero means the simulator's default.
	WorkDuration time.Duration
	// Logger receives the simulator's logs; nil discards them.
	Logger *slog.Logger
}

// StartCluster starts another cluster whose runners connect to this world's GitHub double.
func (w *World) StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.Name == "" {
		return nil, errors.New("a cluster needs a name")
	}
	c := &Cluster{Name: opts.Name}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Kube, err = StartKube(ctx, filepath.Join(w.dir, "cluster-"+opts.Name)); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	if err = c.Kube.StartGarbageCollector(ctx); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	if c.Kubernetes, err = kubernetes.NewForConfig(c.Kube.Config); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.Simulator = simulator.New(simulator.Config{
		Client:       c.Kubernetes,
		GitHub:       githubdouble.NewRunnerClient(w.GitHub.URL()),
		WorkDuration: opts.WorkDuration,
		NodeName:     "runnerflow-sim-node-" + opts.Name,
		Logger:       logger.With("part", "simulator", "cluster", opts.Name),
	})
	simCtx, cancel := context.WithCancel(context.Background())
	c.cancel, c.simDone = cancel, make(chan error, 1)
	go func() { c.simDone <- c.Simulator.Run(simCtx) }()
	return c, nil
}

// Stop ends the cluster's simulator and servers.
func (c *Cluster) Stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.simDone
		c.cancel = nil
	}
	if c.Kube != nil {
		_ = c.Kube.Stop()
	}
}
