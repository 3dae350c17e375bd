package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// peerARCScaleSet names the peer `--peer arc-scaleset` runs: ARC's scale-set mode (the one
// GitHub recommends today) as its users run it, gha-runner-scale-set
// testworld.ARCScaleSetVersion: its controller manager run with --auto-scaling-runner-set-only,
// and its listener process for each set's listener pod. Both speak to GitHub through
// github.com/actions/scaleset v0.4.0, as runnerflow's scale-set pools do. (ARC v0.27.6's
// scale-set mode, this peer before, is not kept: its client asked for a flow of its own.)
const peerARCScaleSet = "arc-scaleset"

// peerARCScaleSetTuned names the same ARC with the limits a careful operator raises for bursts
// (`--peer arc-scaleset-tuned`): arcScaleSetTuned.
const peerARCScaleSetTuned = "arc-scaleset-tuned"

// arcScaleSetSettings are the manager's limits one scale-set peer runs with.
type arcScaleSetSettings struct {
	peer  string
	tuned bool
	// runnerReconciles is --runner-max-concurrent-reconciles; kubeQPS and kubeBurst the
	// manager's Kubernetes client limits. Zero keeps ARC's own.
	runnerReconciles, kubeQPS, kubeBurst int
	// says describes them in the report.
	says string
}

// arcScaleSetDefaults: the chart's defaults, which are also the binary's: two EphemeralRunner
// reconciles at once, a client of 20 QPS with a burst of 30.
var arcScaleSetDefaults = arcScaleSetSettings{peer: peerARCScaleSet,
	says: "chart defaults: 2 EphemeralRunner reconciles at once, Kubernetes client 20 QPS / burst 30"}

// arcScaleSetTuned is what an operator who reads ARC's source raises for bursts, matched to
// runnerflow's worker: its Kubernetes client is 100 QPS with a burst of 200
// (workflows.DefaultKubernetesQPS, twice for the burst), so ARC's manager gets the same; and
// enough EphemeralRunner reconciles at once (20) that the client limit, not the workers, bounds
// how fast runners start (a runner's creation is about five API calls and one JIT
// configuration, so 100 QPS admits about 20 creations a second). The other controllers have
// no concurrency flag, and the listener's own client keeps client-go's 5 QPS / burst 10,
// which no flag or chart value changes.
var arcScaleSetTuned = arcScaleSetSettings{peer: peerARCScaleSetTuned, tuned: true,
	runnerReconciles: 20, kubeQPS: workflows.DefaultKubernetesQPS, kubeBurst: 2 * workflows.DefaultKubernetesQPS,
	says: fmt.Sprintf("tuned: 20 EphemeralRunner reconciles at once, Kubernetes client %d QPS / burst %d (runnerflow's); the listener's client stays at 5 QPS / burst 10 (no flag)",
		workflows.DefaultKubernetesQPS, 2*workflows.DefaultKubernetesQPS)}

// scaleSetNamespace is where the scale-set world's manager, listeners and runners live.
const scaleSetNamespace = "arc-scalesets"

// scaleSetWorld is a fresh test world for ARC's scale-set mode: a kube-apiserver with an
// audit log, the garbage collector, the scale-set CRDs, a GitHub double serving runner scale
// sets as github.com serves them (jobs assigned to a set, no offers), the simulator (which also runs ARC's listener process for each
// listener pod), and ARC's manager. Nothing sends webhooks: the listeners long-poll the
// double's Actions service.
type scaleSetWorld struct {
	opts   Options
	log    *slog.Logger
	dir    string
	token  string
	kube   *testworld.Kube
	client kubernetes.Interface
	dyn    dynamic.Interface
	gh     *githubdouble.Server
	arc    *testworld.ARCScaleSet
	limits arcScaleSetSettings
	online *onlineTimes
	say    func(format string, args ...any)

	stopSim func()
}

// startScaleSetWorld starts the scale-set world; stop ends it.
func startScaleSetWorld(ctx context.Context, opts Options, limits arcScaleSetSettings, log *slog.Logger, say func(string, ...any)) (_ *scaleSetWorld, err error) {
	w := &scaleSetWorld{opts: opts, limits: limits, log: log, say: say, online: newOnlineTimes(log.Handler()), token: "ghp_" + rand.Text()}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.dir, err = os.MkdirTemp("", "runnerflow-arc-scaleset-world-"); err != nil {
		return nil, err
	}
	w.kube, err = testworld.StartKubeWith(ctx, testworld.KubeOptions{
		Dir: w.dir + "/kube", Users: append(testworld.ARCUsers(), testworld.GarbageCollectorUser), AuditWrites: true,
		// The listeners scale their sets as the ServiceAccount ARC gives their pods.
		AuditServiceAccounts: true,
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if w.client, err = kubernetes.NewForConfig(w.kube.Config); err != nil {
		return nil, err
	}
	if w.dyn, err = dynamic.NewForConfig(w.kube.Config); err != nil {
		return nil, err
	}
	// The CRDs first: the garbage collector learns resource types when it starts.
	if err := testworld.InstallARCScaleSetCRDs(ctx, w.kube.Config); err != nil {
		return nil, fmt.Errorf("ARC's scale-set CRDs: %w", err)
	}
	if err := w.kube.StartGarbageCollector(ctx); err != nil {
		return nil, err
	}
	if _, err := w.client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleSetNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	w.gh, err = githubdouble.Start(githubdouble.Config{
		Tokens: []string{w.token}, RateLimit: opts.GitHubBudget, SecondaryPointsPerMinute: opts.GitHubPointsPerMinute,
		// ARC removes every runner it deletes, those the service already let go included:
		// see the option.
		ScaleSetRemovalOfGoneRunners: true,
		Logger:                       slog.New(w.online).With("part", "github-double"),
	})
	if err != nil {
		return nil, fmt.Errorf("github double: %w", err)
	}
	if err := w.startSimulator(); err != nil {
		return nil, err
	}
	w.arc, err = testworld.StartARCScaleSet(ctx, testworld.ARCScaleSetOptions{Kube: w.kube, Namespace: scaleSetNamespace, Dir: w.dir + "/arc",
		RunnerMaxConcurrentReconciles: limits.runnerReconciles, KubeQPS: limits.kubeQPS, KubeBurst: limits.kubeBurst})
	if err != nil {
		return nil, fmt.Errorf("ARC: %w", err)
	}
	return w, nil
}

// startSimulator runs the runner simulator on the namespace, playing ARC's listener pods with
// ARC's listener process as well as the runner pods.
func (w *scaleSetWorld) startSimulator() error {
	listener, err := testworld.ToolPath(testworld.ARCScaleSetListenerTool)
	if err != nil {
		return err
	}
	host, port, ca := w.kube.InClusterEndpoint()
	sim := simulator.New(simulator.Config{
		Client: w.client, Namespaces: []string{scaleSetNamespace},
		GitHub:       githubdouble.NewRunnerClient(w.gh.URL()),
		WorkDuration: w.opts.JobDuration,
		Logger:       slog.New(w.online).With("part", "simulator"),
		ARCListener: &simulator.ARCListener{
			Binary: listener, APIServerHost: host, APIServerPort: port, CA: ca, Dir: w.dir + "/listeners",
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	w.stopSim = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			w.log.Warn("simulator stopped with an error", "error", err)
		}
	}
	return nil
}

// stop ends every part, ARC first, and removes the world's directory.
func (w *scaleSetWorld) stop() {
	if w.arc != nil {
		_ = w.arc.Stop()
	}
	if w.stopSim != nil {
		w.stopSim()
	}
	if w.gh != nil {
		w.gh.Close()
	}
	if w.kube != nil {
		_ = w.kube.Stop()
	}
	if w.dir != "" {
		_ = os.RemoveAll(w.dir)
	}
}

// runScaleSetPeer measures ARC's scale-set mode (--peer arc-scaleset, or arc-scaleset-tuned
// with limits) with the same bursts as runnerflow, in a fresh world of its own started once
// the others are gone.
func runScaleSetPeer(ctx context.Context, opts Options, limits arcScaleSetSettings, progress io.Writer, logPath string, res *Results) error {
	log, say, closeLog, err := peerLog(progress, logPath, limits.peer)
	if err != nil {
		return err
	}
	defer closeLog()
	peer := &PeerResult{
		Name: "actions-runner-controller", Mode: modeScaleSets, Version: testworld.ARCScaleSetVersion,
		Tuned: limits.tuned, Settings: limits.says,
	}
	if limits.tuned {
		res.PeerScaleSetTuned = peer
	} else {
		res.PeerScaleSet = peer
	}
	if err := testworld.ARCScaleSetTools(); err != nil {
		res.Failures = append(res.Failures, "ARC scale-set world: "+err.Error())
		say("ARC scale-set world FAILED: %v", err)
		return ctx.Err()
	}
	w, err := startScaleSetWorld(ctx, opts, limits, log, say)
	if err != nil {
		res.Failures = append(res.Failures, "ARC scale-set world: "+err.Error())
		say("ARC scale-set world FAILED: %v", err)
		return ctx.Err()
	}
	defer w.stop()
	say("ARC scale-set world up (kube-apiserver with audit log, garbage collector, ARC gha-runner-scale-set %s controller manager at %s, GitHub double, simulator running ARC's listener)", testworld.ARCScaleSetVersion, limits.says)
	for _, n := range opts.Jobs {
		b, err := w.burst(ctx, n)
		if err != nil {
			phase := fmt.Sprintf("ARC scale-set burst of %d jobs", n)
			res.Failures = append(res.Failures, phase+": "+err.Error())
			say("%s FAILED: %v", phase, err)
			log.Warn("ARC's log at the failure\n" + w.arc.LogTail())
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		peer.Bursts = append(peer.Bursts, b)
	}
	return nil
}

// peerLog opens the run's log file for a peer's warnings (klog's too) and returns the logger,
// the progress printer and what closes the file.
func peerLog(progress io.Writer, logPath, peer string) (*slog.Logger, func(string, ...any), func(), error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, nil, err
	}
	quietKlog(logFile)
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn})).With("peer", peer)
	say := func(format string, args ...any) {
		fmt.Fprintf(progress, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	return log, say, func() {
		klog.Flush()
		_ = logFile.Close()
	}, nil
}
