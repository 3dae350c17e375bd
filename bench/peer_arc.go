package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// peerARC names the peer `--peer arc` runs: actions-runner-controller, its controller manager
// and GitHub webhook server built from ARC's module as released (scripts/tools.sh, tools/arc).
const peerARC = "arc"

// arcNamespace is where the ARC world's runners live; both ARC processes watch it alone.
const arcNamespace = "arc-runners"

// arcWorld is a fresh test world for ARC: a kube-apiserver (with its own identities for ARC's
// two processes and the garbage collector, and an audit log of their writes), the
// controller-manager's garbage collector (ARC relies on it to delete runner pods), ARC's CRDs,
// a GitHub double with the runnerflow world's settings, the same runner simulator, and ARC,
// whose webhooks pass through a recording proxy that notes when each delivery reached ARC.
type arcWorld struct {
	opts     Options
	log      *slog.Logger
	dir      string
	kube     *testworld.Kube
	client   kubernetes.Interface
	dyn      dynamic.Interface
	gh       *githubdouble.Server
	sim      *simulator.Simulator
	arc      *testworld.ARC
	online   *onlineTimes
	arrivals *arrivals
	say      func(format string, args ...any)

	stopSim func()
}

// startARCWorld starts the ARC world; stop ends it.
func startARCWorld(ctx context.Context, opts Options, log *slog.Logger, say func(string, ...any)) (_ *arcWorld, err error) {
	w := &arcWorld{opts: opts, log: log, say: say, online: newOnlineTimes(log.Handler())}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.dir, err = os.MkdirTemp("", "runnerflow-arc-world-"); err != nil {
		return nil, err
	}
	w.kube, err = testworld.StartKubeWith(ctx, testworld.KubeOptions{
		Dir: w.dir + "/kube", Users: append(testworld.ARCUsers(), testworld.GarbageCollectorUser), AuditWrites: true,
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
	if err := testworld.InstallARCCRDs(ctx, w.kube.Config); err != nil {
		return nil, fmt.Errorf("ARC's CRDs: %w", err)
	}
	if err := w.kube.StartGarbageCollector(ctx); err != nil {
		return nil, err
	}
	if _, err := w.client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: arcNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	token := "ghp_" + rand.Text()
	w.gh, err = githubdouble.Start(githubdouble.Config{
		Tokens: []string{token}, RateLimit: opts.GitHubBudget, SecondaryPointsPerMinute: opts.GitHubPointsPerMinute,
		WebhookSecret: webhookSecret,
		Logger:        slog.New(w.online).With("part", "github-double"),
	})
	if err != nil {
		return nil, fmt.Errorf("github double: %w", err)
	}
	w.startSimulator()
	w.arc, err = testworld.StartARC(ctx, testworld.ARCOptions{
		Kube: w.kube, Namespace: arcNamespace, GitHubURL: w.gh.URL(), GitHubToken: token,
		WebhookSecret: webhookSecret, SyncPeriod: opts.PeerSyncPeriod, Dir: w.dir + "/arc",
	})
	if err != nil {
		return nil, fmt.Errorf("ARC: %w", err)
	}
	if w.arrivals, err = startArrivals(w.arc.WebhookURL, log); err != nil {
		return nil, err
	}
	w.gh.SetWebhookURL(w.arrivals.url)
	return w, nil
}

// startSimulator runs the runner simulator on the ARC namespace, as the runnerflow world does.
func (w *arcWorld) startSimulator() {
	w.sim = simulator.New(simulator.Config{
		Client: w.client, Namespaces: []string{arcNamespace},
		GitHub:       githubdouble.NewRunnerClient(w.gh.URL()),
		WorkDuration: w.opts.JobDuration,
		Logger:       slog.New(w.online).With("part", "simulator"),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.sim.Run(ctx) }()
	w.stopSim = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			w.log.Warn("simulator stopped with an error", "error", err)
		}
	}
}

// stop ends every part, ARC first (so it does not react to the others going), and removes the
// world's directory.
func (w *arcWorld) stop() {
	if w.arc != nil {
		_ = w.arc.Stop()
	}
	if w.arrivals != nil {
		w.arrivals.close()
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

// arrivals is a reverse proxy in front of ARC's webhook server that notes when each delivery
// reached it, as the wrapper around runnerflow's intake does: the same start for figure 1.
type arrivals struct {
	url string
	srv *http.Server

	mu sync.Mutex
	at map[string]time.Time // by X-GitHub-Delivery; the first arrival counts
}

func startArrivals(target string, log *slog.Logger) (*arrivals, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook proxy listener: %w", err)
	}
	a := &arrivals{url: "http://" + ln.Addr().String() + "/", at: map[string]time.Time{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	a.srv = &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			now := time.Now()
			if id := r.Header.Get("X-GitHub-Delivery"); id != "" {
				a.mu.Lock()
				if _, seen := a.at[id]; !seen {
					a.at[id] = now
				}
				a.mu.Unlock()
			}
			proxy.ServeHTTP(rw, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("webhook proxy stopped serving", "error", err)
		}
	}()
	return a, nil
}

func (a *arrivals) receivedAt(deliveryID string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[deliveryID]
	return t, ok
}

func (a *arrivals) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = a.srv.Shutdown(ctx)
}
