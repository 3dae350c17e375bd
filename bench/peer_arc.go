package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// peerARC names the peer `--peer arc` runs: actions-runner-controller, its controller manager
// and GitHub webhook server built from ARC's module as released (scripts/tools.sh, tools/arc).
const peerARC = "arc"

// arcNamespace is where the ARC world's runners live; both ARC processes watch it alone.
const arcNamespace = "arc-runners"

// arcWorld is a fresh test world for ARC's summerwind mode: the peer world (its kube-apiserver
// with its own identities for ARC's two processes and the garbage collector), ARC's CRDs, and
// ARC, whose webhooks pass through a recording proxy that notes when each delivery reached ARC.
type arcWorld struct {
	*peerWorld
	arc      *testworld.ARC
	arrivals *arrivals
}

// startARCWorld starts the ARC world; stop ends it.
func startARCWorld(ctx context.Context, opts Options, log *slog.Logger, say func(string, ...any)) (_ *arcWorld, err error) {
	pw, err := startPeerWorld(ctx, opts, peerWorldSpec{
		peer: peerSpec{
			label: "ARC", pools: "runner deployments", from: "the first webhook", settling: "ARC to scale down",
			prefix: "arc", runners: arcRunners.Resource, writer: arcWriter,
		},
		name: "arc", ns: arcNamespace, kube: testworld.KubeOptions{Users: testworld.ARCUsers()},
		crds: testworld.InstallARCCRDs, gh: githubdouble.Config{WebhookSecret: webhookSecret},
	}, log, say)
	if err != nil {
		return nil, err
	}
	w := &arcWorld{peerWorld: pw}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	w.arc, err = testworld.StartARC(ctx, testworld.ARCOptions{
		Kube: w.kube, Namespace: arcNamespace, GitHubURL: w.gh.URL(), GitHubToken: w.token,
		WebhookSecret: webhookSecret, SyncPeriod: opts.PeerSyncPeriod, Dir: w.dir + "/arc",
	})
	if err != nil {
		return nil, fmt.Errorf("ARC: %w", err)
	}
	if w.arrivals, err = startArrivals(w.arc.WebhookURL, log); err != nil {
		return nil, err
	}
	w.gh.SetWebhookURL(w.arrivals.url)
	say("ARC world up (kube-apiserver with audit log, garbage collector, ARC %s controller manager and webhook server, GitHub double, simulator)", testworld.ARCVersion)
	return w, nil
}

// stop ends ARC first (so it does not react to the others going), then its proxy and the world.
func (w *arcWorld) stop() {
	if w.arc != nil {
		_ = w.arc.Stop()
	}
	if w.arrivals != nil {
		w.arrivals.close()
	}
	w.peerWorld.stop()
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

// runPeer measures ARC's summerwind mode (--peer arc) with the same bursts as runnerflow.
func runPeer(ctx context.Context, opts Options, r peerRun) error {
	r.res.Peer = &PeerResult{
		Name: "actions-runner-controller", Mode: modeSummerwind, Version: testworld.ARCVersion,
		SyncPeriodSeconds: opts.PeerSyncPeriod.Seconds(), BatchSeconds: arcBatchSeconds,
		ScaleDownDelaySeconds: benchScaleDownDelay.Seconds(),
	}
	return runPeerWorld(ctx, r, r.res.Peer, func(log *slog.Logger, say func(string, ...any)) (peerSystem, error) {
		w, err := startARCWorld(ctx, opts, log, say)
		if err != nil {
			return nil, err
		}
		return w, nil
	})
}

// ARC's resources, and the label ARC puts on a RunnerDeployment's runner replica sets,
// runners and pods.
var (
	arcRunnerDeployments = testworld.ARCGroupVersion.WithResource("runnerdeployments")
	arcAutoscalers       = testworld.ARCGroupVersion.WithResource("horizontalrunnerautoscalers")
	arcReplicaSets       = testworld.ARCGroupVersion.WithResource("runnerreplicasets")
	arcRunners           = testworld.ARCGroupVersion.WithResource("runners")
)

const (
	arcDeploymentLabel = "runner-deployment-name"
	// arcBatchSeconds is how long ARC's webhook server batches scale requests before it
	// patches an autoscaler: fixed at 3 s in ARC, as runnerflow's scale window defaults to.
	arcBatchSeconds = 3
	// benchScaleDownDelay is the scale-down delay of the benchmark's pools (poolSpec), which
	// the ARC autoscalers get too (scaleDownDelaySecondsAfterScaleOut).
	benchScaleDownDelay = 15 * time.Second
)

func (w *arcWorld) logTails() string { return w.arc.LogTails() }

// setUp creates, per pool, the RunnerDeployment and then its autoscaler (ARC's webhook server
// finds an autoscaler through its target's organization, so the target must exist first), both
// at the pool's warm runners, and waits until ARC has reconciled both.
func (w *arcWorld) setUp(ctx context.Context, b *peerBurst) error {
	for i, pool := range b.pools {
		if err := w.create(ctx, arcRunnerDeployments, runnerDeployment(pool, burstOrg(pool), b.warm[i])); err != nil {
			return err
		}
		if err := w.create(ctx, arcAutoscalers, autoscaler(pool, b.warm[i], min(b.n, workflows.MaxPoolReplicas))); err != nil {
			return err
		}
	}
	return poll(ctx, "ARC to reconcile the runner deployments and autoscalers", func() (bool, error) {
		for _, pool := range b.pools {
			hra, err := w.dyn.Resource(arcAutoscalers).Namespace(arcNamespace).Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, found, _ := unstructured.NestedInt64(hra.Object, "status", "desiredReplicas"); !found {
				return false, nil
			}
			if n, err := w.count(ctx, arcReplicaSets, pool); err != nil || n == 0 {
				return false, err
			}
		}
		return true, nil
	})
}

// runnerDeployment is the benchmark pool as ARC spells it: organization scope, the same
// labels, ephemeral runners, no Docker sidecar, warm runners until the autoscaler asks more.
func runnerDeployment(name, org string, warm int) map[string]any {
	return arcObject("RunnerDeployment", name, map[string]any{
		"replicas": warm,
		"template": map[string]any{"spec": map[string]any{
			"organization": org, "labels": toAny(jobLabels), "ephemeral": true, "dockerEnabled": false,
		}},
	})
}

// autoscaler scales a RunnerDeployment on workflow_job webhooks between its warm runners and
// max, with the benchmark's scale-down delay; a capacity reservation lasts 30 minutes unless
// its job's completed event ends it first.
func autoscaler(name string, warm, max int) map[string]any {
	return arcObject("HorizontalRunnerAutoscaler", name, map[string]any{
		"scaleTargetRef":                     map[string]any{"kind": "RunnerDeployment", "name": name},
		"minReplicas":                        warm,
		"maxReplicas":                        max,
		"scaleDownDelaySecondsAfterScaleOut": int(benchScaleDownDelay.Seconds()),
		"scaleUpTriggers": []any{map[string]any{
			"githubEvent": map[string]any{"workflowJob": map[string]any{}}, "duration": "30m",
		}},
	})
}

func arcObject(kind, name string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": testworld.ARCGroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": arcNamespace},
		"spec":     spec,
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (w *arcWorld) create(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any) error {
	_, err := w.dyn.Resource(gvr).Namespace(arcNamespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create %s: %w", gvr.Resource, err)
	}
	return nil
}

// count is the number of a pool's objects of one resource.
func (w *arcWorld) count(ctx context.Context, gvr schema.GroupVersionResource, pool string) (int, error) {
	list, err := w.dyn.Resource(gvr).Namespace(arcNamespace).List(ctx, metav1.ListOptions{LabelSelector: arcDeploymentLabel + "=" + pool})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// queue queues the same burst runnerflow got, its webhooks released to ARC in order once all
// are queued.
func (w *arcWorld) queue(b *peerBurst) ([]int64, time.Time, error) {
	return queueBurst(w.gh, b.pools, b.n)
}

// atRest: ARC scaled each runner deployment back to its warm runners, with no other runner
// and no other pod left.
func (w *arcWorld) atRest(ctx context.Context, b *peerBurst) (bool, error) {
	for i, pool := range b.pools {
		rd, err := w.dyn.Resource(arcRunnerDeployments).Namespace(arcNamespace).Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if replicas, _, _ := unstructured.NestedInt64(rd.Object, "spec", "replicas"); replicas != int64(b.warm[i]) {
			return false, nil
		}
		if n, err := w.count(ctx, arcRunners, pool); err != nil || n != b.warm[i] {
			return false, err
		}
	}
	pods, err := w.client.CoreV1().Pods(arcNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != b.warmWanted() {
		return false, err
	}
	return w.batchesPatched(b)
}

// batchesPatched says whether ARC's webhook server has patched each pool's autoscaler since
// the last of the pool's queued and completed webhooks reached it. It batches them for 3 s
// before it patches: until then a pool kept warm can look at rest before ARC has heard of
// the burst at all (a cold one cannot: its jobs need the runners ARC starts).
func (w *arcWorld) batchesPatched(b *peerBurst) (bool, error) {
	poolOf := map[string]string{}
	for _, pool := range b.pools {
		poolOf[burstOrg(pool)+"/app"] = pool
	}
	heard := map[string]time.Time{}
	for _, d := range w.gh.Deliveries() {
		j, _ := w.gh.Job(d.JobID)
		pool, ours := poolOf[j.Repository]
		if !ours || (d.Action != actionQueued && d.Action != actionCompleted) {
			continue
		}
		at, ok := w.arrivals.receivedAt(d.ID)
		if !d.Done || !ok {
			return false, nil
		}
		if at.After(heard[pool]) {
			heard[pool] = at
		}
	}
	writes, err := w.kube.AuditedWrites()
	if err != nil {
		return false, err
	}
	for _, wr := range writes {
		if wr.User == testworld.ARCWebhookServerUser && wr.Key() == "patch horizontalrunnerautoscalers" && wr.Code/100 == 2 && wr.At.After(heard[wr.Name]) {
			delete(heard, wr.Name)
		}
	}
	return len(heard) == 0, nil
}

// tearDown deletes the burst's autoscalers and runner deployments (the garbage collector
// takes their replica sets, runners and pods).
func (w *arcWorld) tearDown(b *peerBurst) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pool := range b.pools {
		for _, gvr := range []schema.GroupVersionResource{arcAutoscalers, arcRunnerDeployments} {
			if err := w.dyn.Resource(gvr).Namespace(arcNamespace).Delete(ctx, pool, metav1.DeleteOptions{}); err != nil {
				w.log.Warn("delete ARC object", "resource", gvr.Resource, "name", pool, "error", err)
			}
		}
	}
}

// arcWriter names ARC's two processes and the garbage collector among the audit log's users.
func arcWriter(user string) (string, bool) {
	switch user {
	case testworld.ARCControllerUser, testworld.ARCWebhookServerUser:
		return "", true
	case testworld.GarbageCollectorUser:
		return garbageCollectorTag, true
	}
	return "", false
}

// starts: figure 1 starts when the job's queued webhook reached ARC (the recording proxy).
func (w *arcWorld) starts(*peerBurst) func(githubdouble.Job) (time.Time, error) {
	queued := map[int64]string{}
	for _, d := range w.gh.Deliveries() {
		if d.Action == actionQueued && queued[d.JobID] == "" {
			queued[d.JobID] = d.ID
		}
	}
	return func(j githubdouble.Job) (time.Time, error) {
		received, ok := w.arrivals.receivedAt(queued[j.ID])
		if !ok {
			return time.Time{}, fmt.Errorf("job %d: its queued webhook never reached ARC", j.ID)
		}
		return received, nil
	}
}

// ownCosts counts the burst's webhook deliveries and those ARC did not answer with a 2xx (its
// webhook server answers 500 when its queue of 100 scale operations is full).
func (w *arcWorld) ownCosts(b *peerBurst, res *PeerBurstResult) {
	jobs := map[int64]bool{}
	for _, id := range b.jobs {
		jobs[id] = true
	}
	for _, d := range w.gh.Deliveries() {
		if !jobs[d.JobID] || !d.Done {
			continue
		}
		res.WebhooksSent++
		if d.StatusCode/100 != 2 {
			res.WebhooksRefused++
		}
	}
}
