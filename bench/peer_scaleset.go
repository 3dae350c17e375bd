package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

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
	tuned bool
	// runnerReconciles is --runner-max-concurrent-reconciles; kubeQPS and kubeBurst the
	// manager's Kubernetes client limits. Zero keeps ARC's own.
	runnerReconciles, kubeQPS, kubeBurst int
	// says describes them in the report.
	says string
}

// arcScaleSetDefaults: the chart's defaults, which are also the binary's: two EphemeralRunner
// reconciles at once, a client of 20 QPS with a burst of 30.
var arcScaleSetDefaults = arcScaleSetSettings{
	says: "chart defaults: 2 EphemeralRunner reconciles at once, Kubernetes client 20 QPS / burst 30"}

// arcScaleSetTuned is what an operator who reads ARC's source raises for bursts, matched to
// runnerflow's worker: its Kubernetes client is 100 QPS with a burst of 200
// (workflows.DefaultKubernetesQPS, twice for the burst), so ARC's manager gets the same; and
// enough EphemeralRunner reconciles at once (20) that the client limit, not the workers, bounds
// how fast runners start (a runner's creation is about five API calls and one JIT
// configuration, so 100 QPS admits about 20 creations a second). The other controllers have
// no concurrency flag, and the listener's own client keeps client-go's 5 QPS with the
// discovery client's burst of 300 (it writes through the clientset's RESTClient, the
// discovery client's), which no flag or chart value changes.
var arcScaleSetTuned = arcScaleSetSettings{tuned: true,
	runnerReconciles: 20, kubeQPS: workflows.DefaultKubernetesQPS, kubeBurst: 2 * workflows.DefaultKubernetesQPS,
	says: fmt.Sprintf("tuned: 20 EphemeralRunner reconciles at once, Kubernetes client %d QPS / burst %d (runnerflow's); the listener's client stays at 5 QPS / burst 300 (no flag)",
		workflows.DefaultKubernetesQPS, 2*workflows.DefaultKubernetesQPS)}

// scaleSetNamespace is where the scale-set world's manager, listeners and runners live.
const scaleSetNamespace = "arc-scalesets"

// scaleSetWorld is a fresh test world for ARC's scale-set mode: the peer world with the
// scale-set CRDs and a double serving runner scale sets as github.com serves them (jobs
// assigned to a set, no offers), its simulator also running ARC's listener process for each
// listener pod, and ARC's manager. Nothing sends webhooks: the listeners long-poll the
// double's Actions service.
type scaleSetWorld struct {
	*peerWorld
	arc *testworld.ARCScaleSet
}

// startScaleSetWorld starts the scale-set world with the manager's limits, where ARC
// 0.14.2's tools are built; stop ends it.
func startScaleSetWorld(ctx context.Context, opts Options, limits arcScaleSetSettings, log *slog.Logger, say func(string, ...any)) (_ *scaleSetWorld, err error) {
	if err := testworld.ARCScaleSetTools(); err != nil {
		return nil, err
	}
	pw, err := startPeerWorld(ctx, opts, peerWorldSpec{
		peer: peerSpec{
			label: "ARC scale-set", pools: "scale sets", from: "the first was queued", settling: "ARC's scale sets to scale down",
			prefix: "arcss", runners: arcEphemeralRunners.Resource, runnerPods: notListenerPods, writer: scaleSetWriter,
		},
		name: "arc-scaleset", ns: scaleSetNamespace,
		// The listeners scale their sets as the ServiceAccount ARC gives their pods.
		kube: testworld.KubeOptions{Users: testworld.ARCUsers(), AuditServiceAccounts: true},
		crds: testworld.InstallARCScaleSetCRDs,
		// ARC removes every runner it deletes, those the service already let go included:
		// see the option.
		gh:       githubdouble.Config{ScaleSetRemovalOfGoneRunners: true},
		listener: arcListener,
	}, log, say)
	if err != nil {
		return nil, err
	}
	w := &scaleSetWorld{peerWorld: pw}
	w.arc, err = testworld.StartARCScaleSet(ctx, testworld.ARCScaleSetOptions{Kube: w.kube, Namespace: scaleSetNamespace, Dir: w.dir + "/arc",
		RunnerMaxConcurrentReconciles: limits.runnerReconciles, KubeQPS: limits.kubeQPS, KubeBurst: limits.kubeBurst})
	if err != nil {
		w.stop()
		return nil, fmt.Errorf("ARC: %w", err)
	}
	say("ARC scale-set world up (kube-apiserver with audit log, garbage collector, ARC gha-runner-scale-set %s controller manager at %s, GitHub double, simulator running ARC's listener)", testworld.ARCScaleSetVersion, limits.says)
	return w, nil
}

// arcListener is ARC's listener process as the simulator runs it for a listener pod, with the
// API server's in-cluster address and CA.
func arcListener(w *peerWorld) (*simulator.ARCListener, error) {
	listener, err := testworld.ToolPath(testworld.ARCScaleSetListenerTool)
	if err != nil {
		return nil, err
	}
	host, port, ca := w.kube.InClusterEndpoint()
	return &simulator.ARCListener{Binary: listener, APIServerHost: host, APIServerPort: port, CA: ca, Dir: w.dir + "/listeners"}, nil
}

// stop ends ARC first, then the world.
func (w *scaleSetWorld) stop() {
	if w.arc != nil {
		_ = w.arc.Stop()
	}
	w.peerWorld.stop()
}

// runScaleSetPeer measures ARC's scale-set mode (--peer arc-scaleset, or arc-scaleset-tuned
// with limits) with the same bursts as runnerflow.
func runScaleSetPeer(ctx context.Context, opts Options, limits arcScaleSetSettings, r peerRun) error {
	peer := &PeerResult{
		Name: "actions-runner-controller", Mode: modeScaleSets, Version: testworld.ARCScaleSetVersion,
		Tuned: limits.tuned, Settings: limits.says,
	}
	if limits.tuned {
		r.res.PeerScaleSetTuned = peer
	} else {
		r.res.PeerScaleSet = peer
	}
	return runPeerWorld(ctx, r, peer, func(log *slog.Logger, say func(string, ...any)) (peerSystem, error) {
		w, err := startScaleSetWorld(ctx, opts, limits, log, say)
		if err != nil {
			return nil, err
		}
		return w, nil
	})
}

// The scale-set mode's resources, and the label ARC puts on its listener pods.
var (
	arcRunnerSets          = testworld.ARCScaleSetGroupVersion.WithResource("autoscalingrunnersets")
	arcEphemeralRunnerSets = testworld.ARCScaleSetGroupVersion.WithResource("ephemeralrunnersets")
	arcEphemeralRunners    = testworld.ARCScaleSetGroupVersion.WithResource("ephemeralrunners")
)

const (
	notListenerPods = "app.kubernetes.io/component!=runner-scale-set-listener"
	// arcScaleSetNameLabel names, on an EphemeralRunnerSet, the AutoscalingRunnerSet it serves.
	arcScaleSetNameLabel = "actions.github.com/scale-set-name"
)

func (w *scaleSetWorld) logTails() string { return w.arc.LogTail() }

// setUp creates, per pool, an AutoscalingRunnerSet in its organization, between the pool's
// warm runners (minRunners) and n, and waits until each set's listener holds a message
// session at the double: from then on a queued job reaches it.
func (w *scaleSetWorld) setUp(ctx context.Context, b *peerBurst) error {
	for i, pool := range b.pools {
		if err := testworld.CreateARCScaleSet(ctx, w.client, w.dyn, testworld.ARCScaleSetSpec{
			Namespace: scaleSetNamespace, Name: pool, ConfigURL: w.gh.URL() + burstOrg(pool), Token: w.token,
			MinRunners: b.warm[i], MaxRunners: min(b.n, workflows.MaxPoolReplicas),
		}); err != nil {
			return err
		}
	}
	return poll(ctx, "ARC's listeners to open their message sessions", func() (bool, error) {
		listening := 0
		for _, ss := range w.gh.ScaleSets() {
			if slices.Contains(b.pools, ss.Name) && ss.SessionID != "" {
				listening++
			}
		}
		return listening == len(b.pools), nil
	})
}

// queue queues the burst, each job for its pool's set (runs-on names the set).
func (w *scaleSetWorld) queue(b *peerBurst) ([]int64, time.Time, error) {
	var jobs []int64
	for i := range b.n {
		pool := b.pools[i%len(b.pools)]
		j, err := w.gh.QueueJob(githubdouble.JobSpec{Repository: burstOrg(pool) + "/app", Labels: []string{pool}})
		if err != nil {
			return jobs, b.start, err
		}
		jobs = append(jobs, j.ID)
	}
	return jobs, b.start, nil
}

// atRest: both sets are back to their warm runners: their EphemeralRunnerSets ask for no
// more, and no other EphemeralRunner or runner pod is left, none being deleted either
// (scaleSetRunners): a finished runner's writes all count in its burst.
func (w *scaleSetWorld) atRest(ctx context.Context, b *peerBurst) (bool, error) {
	sets, err := w.dyn.Resource(arcEphemeralRunnerSets).Namespace(scaleSetNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, set := range sets.Items {
		want := 0
		if i := slices.Index(b.pools, set.GetLabels()[arcScaleSetNameLabel]); i >= 0 {
			want = b.warm[i]
		}
		if replicas, _, _ := unstructured.NestedInt64(set.Object, "spec", "replicas"); replicas != int64(want) {
			return false, nil
		}
	}
	live, deleting, err := w.scaleSetRunners(ctx)
	if err != nil || len(deleting) > 0 || len(live) != b.warmWanted() {
		return false, err
	}
	pods, err := w.client.CoreV1().Pods(scaleSetNamespace).List(ctx, metav1.ListOptions{LabelSelector: notListenerPods})
	if err != nil {
		return false, err
	}
	for _, pod := range pods.Items {
		if !live[pod.Name] {
			return false, nil
		}
	}
	return true, nil
}

// scaleSetRunners names the EphemeralRunners left: those not being deleted (live) and those
// being deleted. ARC finalizes a finished runner's EphemeralRunner (its removal at the service,
// two finalizer patches, the pod's and the Secret's deletion) only when its controller's
// workers and client bucket get to it, which at the chart's defaults lags the burst by a
// minute or more. It never records a finished runner as Succeeded first, so a runner being
// deleted is waited for, whatever its phase: this world's double answers the removal of a
// runner the service already let go as done (githubdouble.Config.ScaleSetRemovalOfGoneRunners),
// so ARC cannot get stuck on it, and a burst that never settles fails at its settling timeout.
func (w *scaleSetWorld) scaleSetRunners(ctx context.Context) (live, deleting map[string]bool, err error) {
	runners, err := w.dyn.Resource(arcEphemeralRunners).Namespace(scaleSetNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	live, deleting = map[string]bool{}, map[string]bool{}
	for _, r := range runners.Items {
		if r.GetDeletionTimestamp() == nil {
			live[r.GetName()] = true
		} else {
			deleting[r.GetName()] = true
		}
	}
	return live, deleting, nil
}

// tearDown drops the finalizers of any EphemeralRunner ARC is still deleting (none once the
// burst settled; a burst that did not leaves them), as an operator would (the benchmark's own
// write, not counted), deletes the burst's sets, waits until ARC has finished them (their
// finalizers remove their runners, end the listener and delete the scale set at the double),
// and only then deletes their Secrets.
func (w *scaleSetWorld) tearDown(b *peerBurst) {
	// A warm burst's sets still have their idle runners, which ARC removes at the service
	// before it lets a set go: that takes minutes at the chart's client limit, and needs the
	// set's GitHub Secret until the set is gone.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, deleting, err := w.scaleSetRunners(ctx)
	if err != nil {
		w.log.Warn("list EphemeralRunners", "error", err)
	}
	for name := range deleting {
		_, err := w.dyn.Resource(arcEphemeralRunners).Namespace(scaleSetNamespace).Patch(ctx, name,
			types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil {
			w.log.Warn("drop a stuck EphemeralRunner's finalizers", "name", name, "error", err)
		}
	}
	sets := w.dyn.Resource(arcRunnerSets).Namespace(scaleSetNamespace)
	for _, pool := range b.pools {
		if err := sets.Delete(ctx, pool, metav1.DeleteOptions{}); err != nil {
			w.log.Warn("delete AutoscalingRunnerSet", "name", pool, "error", err)
		}
	}
	err = poll(ctx, "ARC to finish the deleted scale sets", func() (bool, error) {
		list, err := sets.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		w.log.Warn("ARC's scale sets outlived the burst", "error", err)
	}
	for _, pool := range b.pools {
		if err := w.client.CoreV1().Secrets(scaleSetNamespace).Delete(ctx, pool+"-github", metav1.DeleteOptions{}); err != nil {
			w.log.Warn("delete the scale set's secret", "name", pool, "error", err)
		}
	}
}

// scaleSetWriter names ARC's parts among the audit log's users: the controller manager, the
// listeners (each acts as its ServiceAccount) and the garbage collector.
func scaleSetWriter(user string) (string, bool) {
	switch {
	case user == testworld.ARCControllerUser:
		return "", true
	case strings.HasPrefix(user, "system:serviceaccount:"+scaleSetNamespace+":"):
		return "listener", true
	case user == testworld.GarbageCollectorUser:
		return garbageCollectorTag, true
	}
	return "", false
}

// starts: a scale set takes no webhook, so figure 1 starts when the job was queued at the
// double (the same moment starts runnerflow's within the time the double takes to send it).
func (w *scaleSetWorld) starts(*peerBurst) func(githubdouble.Job) (time.Time, error) {
	return func(j githubdouble.Job) (time.Time, error) { return j.CreatedAt, nil }
}

// ownCosts adds the sets' calls to the Actions service.
func (w *scaleSetWorld) ownCosts(b *peerBurst, res *PeerBurstResult) {
	res.ActionsService = actionsServiceCost(w.gh, res.Runners, b.n)
}

// actionsServiceCost is the scale sets' calls to the double's Actions service since the last
// reset, counted as figure 2 counts REST calls.
func actionsServiceCost(gh *githubdouble.Server, runners, jobs int) *GitHubResult {
	res := &GitHubResult{ByEndpoint: map[string]int{}}
	for k, v := range gh.ActionsServiceCalls() {
		res.ByEndpoint[fmt.Sprintf("%s %d", k.Route, k.Status)] += v
		res.Calls += v
		if strings.Contains(k.Route, "/acquirejobs") || strings.Contains(k.Route, "/acquirablejobs") {
			res.Acquisitions += v
		}
	}
	res.PerRunner = ratio(res.Calls, runners)
	res.PerJob = ratio(res.Calls, jobs)
	return res
}
