package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

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

// arcBurst is one burst of queued jobs in the ARC world.
type arcBurst struct {
	w     *arcWorld
	n     int
	pools []string
	jobs  []int64
	// start is just before the jobs were queued, released when the double started sending
	// their webhooks.
	start, released, allStarted time.Time
}

// burst measures figures 1, 2 and 4 for ARC exactly as env.burst does for runnerflow: n jobs
// queued at once across two RunnerDeployments with their autoscalers (webhooks held, then
// released in order to ARC's webhook server), until every job ran and ARC has scaled both
// back to zero with no runner or pod left.
func (w *arcWorld) burst(ctx context.Context, n int) (PeerBurstResult, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.PhaseTimeout)
	defer cancel()
	b := &arcBurst{w: w, n: n}
	defer b.tearDown()
	if err := b.setUp(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	w.say("ARC burst of %d jobs across %d runner deployments: queueing", n, len(b.pools))
	if err := b.fire(); err != nil {
		return PeerBurstResult{}, err
	}
	if err := b.waitStarted(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	w.say("ARC burst of %d: every job started %.1fs after the first webhook; waiting for ARC to scale down", n, b.allStarted.Sub(b.released).Seconds())
	if err := b.waitSettled(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	end := time.Now()
	w.say("ARC burst of %d: settled after %.1fs; reading the audit log", n, end.Sub(b.released).Seconds())
	return b.measure(end)
}

// setUp creates the repositories at the double and, per pool, the RunnerDeployment and then
// its autoscaler (ARC's webhook server finds an autoscaler through its target's organization,
// so the target must exist first), and waits until ARC has reconciled both.
func (b *arcBurst) setUp(ctx context.Context) error {
	for i := range burstPools {
		pool := fmt.Sprintf("arc%d-%c", b.n, 'a'+i)
		org := "org-" + pool
		if err := b.w.gh.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
			return err
		}
		b.pools = append(b.pools, pool)
		if err := b.create(ctx, arcRunnerDeployments, runnerDeployment(pool, org)); err != nil {
			return err
		}
		if err := b.create(ctx, arcAutoscalers, autoscaler(pool, min(b.n, workflows.MaxPoolReplicas))); err != nil {
			return err
		}
	}
	return poll(ctx, "ARC to reconcile the runner deployments and autoscalers", func() (bool, error) {
		for _, pool := range b.pools {
			hra, err := b.w.dyn.Resource(arcAutoscalers).Namespace(arcNamespace).Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, found, _ := unstructured.NestedInt64(hra.Object, "status", "desiredReplicas"); !found {
				return false, nil
			}
			if n, err := b.count(ctx, arcReplicaSets, pool); err != nil || n == 0 {
				return false, err
			}
		}
		return true, nil
	})
}

// runnerDeployment is the benchmark pool as ARC spells it: organization scope, the same
// labels, ephemeral runners, no Docker sidecar, no runner until the autoscaler asks.
func runnerDeployment(name, org string) map[string]any {
	return arcObject("RunnerDeployment", name, map[string]any{
		"replicas": 0,
		"template": map[string]any{"spec": map[string]any{
			"organization": org, "labels": toAny(jobLabels), "ephemeral": true, "dockerEnabled": false,
		}},
	})
}

// autoscaler scales a RunnerDeployment on workflow_job webhooks between 0 and max, with the
// benchmark's scale-down delay; a capacity reservation lasts 30 minutes unless its job's
// completed event ends it first.
func autoscaler(name string, max int) map[string]any {
	return arcObject("HorizontalRunnerAutoscaler", name, map[string]any{
		"scaleTargetRef":                     map[string]any{"kind": "RunnerDeployment", "name": name},
		"minReplicas":                        0,
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

func (b *arcBurst) create(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any) error {
	_, err := b.w.dyn.Resource(gvr).Namespace(arcNamespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create %s: %w", gvr.Resource, err)
	}
	return nil
}

// count is the number of a pool's objects of one resource.
func (b *arcBurst) count(ctx context.Context, gvr schema.GroupVersionResource, pool string) (int, error) {
	list, err := b.w.dyn.Resource(gvr).Namespace(arcNamespace).List(ctx, metav1.ListOptions{LabelSelector: arcDeploymentLabel + "=" + pool})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// fire resets the double's counters and queues the same burst runnerflow got.
func (b *arcBurst) fire() error {
	b.w.gh.ResetCalls()
	b.start = time.Now()
	var err error
	b.jobs, b.released, err = queueBurst(b.w.gh, b.pools, b.n)
	return err
}

func (b *arcBurst) waitStarted(ctx context.Context) error {
	var err error
	b.allStarted, err = waitJobsStarted(ctx, b.w.gh, b.jobs)
	return err
}

// waitSettled waits until every job completed and ARC scaled both runner deployments back to
// zero with no runner and no pod left (its scale-down waits for the delay after the last
// scale-out, and the autoscaler looks again at the latest after its sync period).
func (b *arcBurst) waitSettled(ctx context.Context) error {
	return pollEvery(ctx, time.Second, "ARC's runners to finish", func() (bool, error) {
		for _, id := range b.jobs {
			if j, _ := b.w.gh.Job(id); j.Status != githubdouble.StatusCompleted {
				return false, nil
			}
		}
		for _, pool := range b.pools {
			rd, err := b.w.dyn.Resource(arcRunnerDeployments).Namespace(arcNamespace).Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if replicas, _, _ := unstructured.NestedInt64(rd.Object, "spec", "replicas"); replicas != 0 {
				return false, nil
			}
			if n, err := b.count(ctx, arcRunners, pool); err != nil || n > 0 {
				return false, err
			}
		}
		pods, err := b.w.client.CoreV1().Pods(arcNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

// tearDown deletes the burst's autoscalers and runner deployments (the garbage collector
// takes their replica sets), so they do not load the next burst.
func (b *arcBurst) tearDown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pool := range b.pools {
		for _, gvr := range []schema.GroupVersionResource{arcAutoscalers, arcRunnerDeployments} {
			if err := b.w.dyn.Resource(gvr).Namespace(arcNamespace).Delete(ctx, pool, metav1.DeleteOptions{}); err != nil {
				b.w.log.Warn("delete ARC object", "resource", gvr.Resource, "name", pool, "error", err)
			}
		}
	}
}

// measure reads the double's counters, the audit log and the simulator's online times.
func (b *arcBurst) measure(end time.Time) (PeerBurstResult, error) {
	res := PeerBurstResult{Jobs: b.n, Pools: len(b.pools), Seconds: round1(end.Sub(b.released).Seconds())}
	writes, err := b.w.kube.AuditedWrites()
	if err != nil {
		return res, err
	}
	var ours []testworld.AuditedWrite
	for _, wr := range writes {
		if !wr.At.Before(b.start) && !wr.At.After(end) {
			ours = append(ours, wr)
		}
	}
	podCreated := map[string]time.Time{}
	for _, wr := range ours {
		switch {
		case wr.User != testworld.ARCControllerUser || wr.Code/100 != 2:
		case wr.Key() == "create pods":
			podCreated[wr.Name] = wr.At
		case wr.Key() == "create runners":
			res.Runners++
		}
	}
	res.GitHub = githubCost(b.w.gh, res.Runners, b.n)
	res.Kubernetes, res.GarbageCollectorWrites = peerKubernetesCost(ours, res.Runners, b.n, arcWriter)
	res.WebhooksSent, res.WebhooksRefused = b.deliveries()
	res.Latency, res.JobsOnPeerPods, err = b.latencies(podCreated)
	return res, err
}

// garbageCollectorTag marks the garbage collector's writes among a peer's.
const garbageCollectorTag = "garbage collector"

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

// peerKubernetesCost is figure 4 for a peer from the audit log: every write of the users
// writer names (tagging some, as "(listener)"), with the garbage collector's deletes of the
// peer's objects (ARC leaves its runner pods to it, where runnerflow deletes its own), which
// are also counted apart.
func peerKubernetesCost(writes []testworld.AuditedWrite, runners, jobs int, writer func(user string) (tag string, ok bool)) (KubernetesResult, int) {
	res := KubernetesResult{ByKind: map[string]int{}}
	gc := 0
	for _, wr := range writes {
		tag, ok := writer(wr.User)
		if !ok {
			continue
		}
		key := wr.Key()
		if tag != "" {
			key += " (" + tag + ")"
		}
		if tag == garbageCollectorTag {
			gc++
		}
		if wr.Code/100 != 2 {
			// Refused writes count, as the counting transport counts them for runnerflow;
			// their answer shows (a conflict, a missing object).
			key += fmt.Sprintf(" → %d", wr.Code)
		}
		res.ByKind[key]++
		res.Writes++
	}
	res.PerRunner = ratio(res.Writes, runners)
	res.PerJob = ratio(res.Writes, jobs)
	return res, gc
}

// deliveries counts the burst's webhook deliveries and those ARC did not answer with a 2xx
// (its webhook server answers 500 when its queue of 100 scale operations is full).
func (b *arcBurst) deliveries() (sent, refused int) {
	jobs := map[int64]bool{}
	for _, id := range b.jobs {
		jobs[id] = true
	}
	for _, d := range b.w.gh.Deliveries() {
		if !jobs[d.JobID] || !d.Done {
			continue
		}
		sent++
		if d.StatusCode/100 != 2 {
			refused++
		}
	}
	return sent, refused
}

// latencies pairs, per job, the arrival of its queued webhook at ARC with the creation of the
// pod of the runner that ran it (ARC's pod create call, from the audit log), the runner coming
// online (the simulator) and the job starting (the double). It also counts the jobs whose
// runner is a pod ARC created, which must be all of them.
func (b *arcBurst) latencies(podCreated map[string]time.Time) (PeerLatency, int, error) {
	queued := map[int64]string{}
	for _, d := range b.w.gh.Deliveries() {
		if d.Action == actionQueued && queued[d.JobID] == "" {
			queued[d.JobID] = d.ID
		}
	}
	var toPod, toOnline, toStarted []time.Duration
	var missing []string
	onPeerPods := 0
	for _, id := range b.jobs {
		j, _ := b.w.gh.Job(id)
		received, ok := b.w.arrivals.receivedAt(queued[id])
		if !ok {
			return PeerLatency{}, 0, fmt.Errorf("job %d: its queued webhook never reached ARC", id)
		}
		created, ok := podCreated[j.RunnerName]
		if !ok {
			missing = append(missing, fmt.Sprintf("job %d ran on %q", id, j.RunnerName))
			continue
		}
		onPeerPods++
		online, ok := b.w.online.at(j.RunnerName)
		if !ok {
			return PeerLatency{}, 0, fmt.Errorf("job %d: runner %q was never seen coming online", id, j.RunnerName)
		}
		toPod = append(toPod, created.Sub(received))
		toOnline = append(toOnline, online.Sub(received))
		toStarted = append(toStarted, j.StartedAt.Sub(received))
	}
	if len(missing) > 0 {
		return PeerLatency{}, onPeerPods, fmt.Errorf("jobs whose runner is not a pod ARC created: %s", strings.Join(missing, "; "))
	}
	return PeerLatency{
		ToPodCreate: summarize(toPod), ToOnline: summarize(toOnline), ToStarted: summarize(toStarted),
		AllStartedSeconds: round1(b.allStarted.Sub(b.released).Seconds()),
	}, onPeerPods, nil
}
