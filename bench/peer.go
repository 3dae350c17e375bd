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
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// ARC's two modes, as the comparison names them.
const (
	modeSummerwind = "summerwind"
	modeScaleSets  = "scale sets"
)

// runPeers measures each peer --peer names, in the order given, each in a world of its own
// started once the one before is gone, so no two share the machine. Their warnings go to the
// same log file as runnerflow's.
func runPeers(ctx context.Context, opts Options, progress io.Writer, logPath string, res *Results) error {
	for _, p := range opts.peers() {
		r := peerRun{name: p, progress: progress, logPath: logPath, res: res}
		var err error
		switch p {
		case peerARCScaleSet:
			err = runScaleSetPeer(ctx, opts, arcScaleSetDefaults, r)
		case peerARCScaleSetTuned:
			err = runScaleSetPeer(ctx, opts, arcScaleSetTuned, r)
		default:
			err = runPeer(ctx, opts, r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// peerRun is where one peer's run reports: its progress lines, the log file, the results.
type peerRun struct {
	name, logPath string
	progress      io.Writer
	res           *Results
}

// startPeer starts a peer's world with the log and progress printer it is given.
type startPeer func(log *slog.Logger, say func(string, ...any)) (peerSystem, error)

// runPeerWorld starts the peer's world (start says what came up) and runs every --jobs burst
// through it into peer; a burst that fails is recorded with the peer's logs and the next one
// still runs.
func runPeerWorld(ctx context.Context, r peerRun, peer *PeerResult, start startPeer) error {
	log, say, closeLog, err := peerLog(r.progress, r.logPath, r.name)
	if err != nil {
		return err
	}
	defer closeLog()
	sys, err := start(log, say)
	if err != nil {
		what := "world of " + peerShort(peer)
		r.res.Failures = append(r.res.Failures, what+": "+err.Error())
		say("%s FAILED: %v", what, err)
		return ctx.Err()
	}
	defer sys.stop()
	w := sys.world()
	for _, n := range w.opts.Jobs {
		b, err := runPeerBurst(ctx, sys, n)
		if err != nil {
			phase := fmt.Sprintf("%s burst of %d jobs", w.spec.label, n)
			r.res.Failures = append(r.res.Failures, phase+": "+err.Error())
			say("%s FAILED: %v", phase, err)
			log.Warn("ARC's logs at the failure\n" + sys.logTails())
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		peer.Bursts = append(peer.Bursts, b)
	}
	return nil
}

// peerWorld is what every peer's world holds: a kube-apiserver with an audit log of the
// peer's writes, the garbage collector (ARC leaves its runner pods to it), the peer's CRDs,
// a GitHub double with the runnerflow world's budget, and the runner simulator on the
// peer's namespace. The peer's own processes come on top.
type peerWorld struct {
	spec   peerSpec
	opts   Options
	log    *slog.Logger
	say    func(format string, args ...any)
	dir    string
	ns     string
	token  string
	kube   *testworld.Kube
	client kubernetes.Interface
	dyn    dynamic.Interface
	gh     *githubdouble.Server
	online *onlineTimes

	stopSim func()
}

// peerWorldSpec is what a peer's world needs of its own.
type peerWorldSpec struct {
	peer     peerSpec
	name, ns string
	kube     testworld.KubeOptions
	crds     func(context.Context, *rest.Config) error
	// gh is the double's configuration; the world adds the token, budget and logger.
	gh githubdouble.Config
	// listener, when set, has the simulator play the listener pods with ARC's listener process.
	listener func(w *peerWorld) (*simulator.ARCListener, error)
}

// startPeerWorld starts what spec describes; stop ends it. On an error what was started is
// stopped.
func startPeerWorld(ctx context.Context, opts Options, spec peerWorldSpec, log *slog.Logger, say func(string, ...any)) (_ *peerWorld, err error) {
	w := &peerWorld{spec: spec.peer, opts: opts, log: log, say: say, ns: spec.ns, online: newOnlineTimes(log.Handler()), token: "ghp_" + rand.Text()}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.dir, err = os.MkdirTemp("", "runnerflow-"+spec.name+"-world-"); err != nil {
		return nil, err
	}
	spec.kube.Dir, spec.kube.AuditWrites = w.dir+"/kube", true
	spec.kube.Users = append(spec.kube.Users, testworld.GarbageCollectorUser)
	if w.kube, err = testworld.StartKubeWith(ctx, spec.kube); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if w.client, err = kubernetes.NewForConfig(w.kube.Config); err != nil {
		return nil, err
	}
	if w.dyn, err = dynamic.NewForConfig(w.kube.Config); err != nil {
		return nil, err
	}
	// The CRDs first: the garbage collector learns resource types when it starts.
	if err := spec.crds(ctx, w.kube.Config); err != nil {
		return nil, fmt.Errorf("%s's CRDs: %w", spec.name, err)
	}
	if err := w.kube.StartGarbageCollector(ctx); err != nil {
		return nil, err
	}
	if _, err := w.client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	spec.gh.Tokens, spec.gh.RateLimit, spec.gh.SecondaryPointsPerMinute = []string{w.token}, opts.GitHubBudget, opts.GitHubPointsPerMinute
	spec.gh.Logger = slog.New(w.online).With("part", "github-double")
	if w.gh, err = githubdouble.Start(spec.gh); err != nil {
		return nil, fmt.Errorf("github double: %w", err)
	}
	if err := w.startSimulator(spec); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *peerWorld) world() *peerWorld { return w }

// startSimulator runs the runner simulator on the peer's namespace, as the runnerflow world
// does.
func (w *peerWorld) startSimulator(spec peerWorldSpec) error {
	cfg := simulator.Config{
		Client: w.client, Namespaces: []string{w.ns},
		GitHub:       githubdouble.NewRunnerClient(w.gh.URL()),
		WorkDuration: w.opts.JobDuration,
		Logger:       slog.New(w.online).With("part", "simulator"),
	}
	if spec.listener != nil {
		var err error
		if cfg.ARCListener, err = spec.listener(w); err != nil {
			return err
		}
	}
	sim := simulator.New(cfg)
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

// stop ends the simulator, the double and Kubernetes, and removes the world's directory; the
// peer's own processes are stopped before it, so they do not react to the others going.
func (w *peerWorld) stop() {
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
