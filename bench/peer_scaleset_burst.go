package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// The scale-set mode's resources, and the label ARC puts on its listener pods.
var (
	arcRunnerSets          = testworld.ARCScaleSetGroupVersion.WithResource("autoscalingrunnersets")
	arcEphemeralRunnerSets = testworld.ARCScaleSetGroupVersion.WithResource("ephemeralrunnersets")
	arcEphemeralRunners    = testworld.ARCScaleSetGroupVersion.WithResource("ephemeralrunners")
)

const (
	notListenerPods = "app.kubernetes.io/component!=runner-scale-set-listener"
	// arcRegistrationFinalizer is the finalizer with which ARC removes an EphemeralRunner's
	// runner at the service before letting it go.
	arcRegistrationFinalizer = "ephemeralrunner.actions.github.com/runner-registration-finalizer"
)

// scaleSetBurst is one burst of queued jobs in the scale-set world.
type scaleSetBurst struct {
	w     *scaleSetWorld
	n     int
	pools []string
	jobs  []int64
	// start is just before the first job was queued; the listeners learn of jobs from the
	// double's Actions service, not from webhooks.
	start, allStarted time.Time
	// stuck counts the EphemeralRunners ARC was stuck deleting when the burst settled.
	stuck int
}

// burst measures figures 1, 2 and 4 for ARC's scale sets: n jobs queued at once across two
// AutoscalingRunnerSets (one per pool, each in its organization, between 0 and n runners),
// until every job ran and both sets are back to zero runners with no runner pod left.
func (w *scaleSetWorld) burst(ctx context.Context, n int) (PeerBurstResult, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.PhaseTimeout)
	defer cancel()
	b := &scaleSetBurst{w: w, n: n}
	defer b.tearDown()
	if err := b.setUp(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	w.say("ARC scale-set burst of %d jobs across %d scale sets: queueing", n, len(b.pools))
	if err := b.fire(); err != nil {
		return PeerBurstResult{}, err
	}
	var err error
	if b.allStarted, err = waitJobsStarted(ctx, w.gh, b.jobs); err != nil {
		return PeerBurstResult{}, err
	}
	w.say("ARC scale-set burst of %d: every job started %.1fs after the first was queued; waiting for the sets to scale down", n, b.allStarted.Sub(b.start).Seconds())
	if err := b.waitSettled(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	end := time.Now()
	w.say("ARC scale-set burst of %d: settled after %.1fs; reading the audit log", n, end.Sub(b.start).Seconds())
	return b.measure(end)
}

// setUp creates, per pool, the organization's repository at the double and an
// AutoscalingRunnerSet for it, and waits until each set's listener holds a message session at
// the double: from then on a queued job reaches it.
func (b *scaleSetBurst) setUp(ctx context.Context) error {
	for i := range burstPools {
		pool := fmt.Sprintf("arcss%d-%c", b.n, 'a'+i)
		if err := b.w.gh.AddRepository(githubdouble.RepositorySpec{FullName: burstOrg(pool) + "/app"}); err != nil {
			return err
		}
		b.pools = append(b.pools, pool)
		if err := testworld.CreateARCScaleSet(ctx, b.w.client, b.w.dyn, testworld.ARCScaleSetSpec{
			Namespace: scaleSetNamespace, Name: pool, ConfigURL: b.w.gh.URL() + burstOrg(pool), Token: b.w.token,
			MaxRunners: min(b.n, workflows.MaxPoolReplicas),
		}); err != nil {
			return err
		}
	}
	return poll(ctx, "ARC's listeners to open their message sessions", func() (bool, error) {
		listening := 0
		for _, ss := range b.w.gh.ScaleSets() {
			for _, pool := range b.pools {
				if ss.Name == pool && ss.SessionID != "" {
					listening++
				}
			}
		}
		return listening == len(b.pools), nil
	})
}

// fire resets the double's counters and queues the burst, each job for its pool's set
// (runs-on names the set).
func (b *scaleSetBurst) fire() error {
	b.w.gh.ResetCalls()
	b.start = time.Now()
	for i := range b.n {
		pool := b.pools[i%len(b.pools)]
		j, err := b.w.gh.QueueJob(githubdouble.JobSpec{Repository: burstOrg(pool) + "/app", Labels: []string{pool}})
		if err != nil {
			return err
		}
		b.jobs = append(b.jobs, j.ID)
	}
	return nil
}

// waitSettled waits until every job completed and both sets are back to zero: their
// EphemeralRunnerSets ask for no runner, and no EphemeralRunner or runner pod is left but
// those ARC is stuck deleting (stuckDeleting).
func (b *scaleSetBurst) waitSettled(ctx context.Context) error {
	return pollEvery(ctx, time.Second, "ARC's scale sets to scale down", func() (bool, error) {
		for _, id := range b.jobs {
			if j, _ := b.w.gh.Job(id); j.Status != githubdouble.StatusCompleted {
				return false, nil
			}
		}
		sets, err := b.w.dyn.Resource(arcEphemeralRunnerSets).Namespace(scaleSetNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, set := range sets.Items {
			if replicas, _, _ := unstructured.NestedInt64(set.Object, "spec", "replicas"); replicas != 0 {
				return false, nil
			}
		}
		stuck, err := b.stuckDeleting(ctx)
		if err != nil || stuck == nil {
			return false, err
		}
		pods, err := b.w.client.CoreV1().Pods(scaleSetNamespace).List(ctx, metav1.ListOptions{LabelSelector: notListenerPods})
		if err != nil {
			return false, err
		}
		for _, pod := range pods.Items {
			if !stuck[pod.Name] {
				return false, nil
			}
		}
		b.stuck = len(stuck)
		return true, nil
	})
}

// stuckDeleting names the EphemeralRunners left, each of which ARC is stuck deleting; nil
// while another is left. ARC removes a runner at the service when it finalizes its
// EphemeralRunner, after the runner finished or the set removed it already, and takes any
// answer but success for a failure it retries for ever: where the service answers such a
// second removal "not found" (the double's default; this world's double answers it as done,
// githubdouble.Config.ScaleSetRemovalOfGoneRunners) the runner never goes, nor its pod. Such
// a runner is being deleted, has not finished and still holds ARC's registration finalizer;
// one being deleted otherwise is waited for.
func (b *scaleSetBurst) stuckDeleting(ctx context.Context) (map[string]bool, error) {
	runners, err := b.w.dyn.Resource(arcEphemeralRunners).Namespace(scaleSetNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	stuck := map[string]bool{}
	for _, r := range runners.Items {
		phase, _, _ := unstructured.NestedString(r.Object, "status", "phase")
		if r.GetDeletionTimestamp() == nil || phase == string(corev1.PodSucceeded) || !slices.Contains(r.GetFinalizers(), arcRegistrationFinalizer) {
			return nil, nil
		}
		stuck[r.GetName()] = true
	}
	return stuck, nil
}

// unstick drops the finalizers of the EphemeralRunners ARC is stuck deleting, as an operator
// would, so the burst's sets can go. The benchmark's own write, not counted.
func (b *scaleSetBurst) unstick(ctx context.Context) {
	stuck, err := b.stuckDeleting(ctx)
	if err != nil {
		b.w.log.Warn("list EphemeralRunners", "error", err)
	}
	for name := range stuck {
		_, err := b.w.dyn.Resource(arcEphemeralRunners).Namespace(scaleSetNamespace).Patch(ctx, name,
			types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil {
			b.w.log.Warn("drop a stuck EphemeralRunner's finalizers", "name", name, "error", err)
		}
	}
}

// tearDown deletes the burst's sets and their Secrets, and waits until ARC has finished them
// (their finalizers end the listener and delete the scale set at the double), so they do not
// load the next burst.
func (b *scaleSetBurst) tearDown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.unstick(ctx)
	sets := b.w.dyn.Resource(arcRunnerSets).Namespace(scaleSetNamespace)
	for _, pool := range b.pools {
		if err := sets.Delete(ctx, pool, metav1.DeleteOptions{}); err != nil {
			b.w.log.Warn("delete AutoscalingRunnerSet", "name", pool, "error", err)
		}
		if err := b.w.client.CoreV1().Secrets(scaleSetNamespace).Delete(ctx, pool+"-github", metav1.DeleteOptions{}); err != nil {
			b.w.log.Warn("delete the scale set's secret", "name", pool, "error", err)
		}
	}
	err := poll(ctx, "ARC to finish the deleted scale sets", func() (bool, error) {
		list, err := sets.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		b.w.log.Warn("ARC's scale sets outlived the burst", "error", err)
	}
}

// measure reads the double's counters, the audit log and the simulator's online times.
func (b *scaleSetBurst) measure(end time.Time) (PeerBurstResult, error) {
	res := PeerBurstResult{Jobs: b.n, Pools: len(b.pools), Seconds: round1(end.Sub(b.start).Seconds()), RunnersStuckDeleting: b.stuck}
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
		case wr.Key() == "create ephemeralrunners":
			res.Runners++
		}
	}
	res.GitHub = githubCost(b.w.gh, res.Runners, b.n)
	res.ActionsService = actionsServiceCost(b.w.gh, res.Runners, b.n)
	res.Kubernetes, res.GarbageCollectorWrites = peerKubernetesCost(ours, res.Runners, b.n, scaleSetWriter)
	res.Latency, res.JobsOnPeerPods, err = b.latencies(podCreated)
	return res, err
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

// latencies pairs, per job, its queuing at the double (a scale set takes no webhook; the same
// moment starts runnerflow's figure within the time the double takes to send it) with the
// creation of the pod of the runner that ran it, the runner coming online and the job
// starting. It also counts the jobs whose runner is a pod ARC created, which must be all.
func (b *scaleSetBurst) latencies(podCreated map[string]time.Time) (PeerLatency, int, error) {
	var toPod, toOnline, toStarted []time.Duration
	var missing []string
	onPeerPods := 0
	for _, id := range b.jobs {
		j, _ := b.w.gh.Job(id)
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
		toPod = append(toPod, created.Sub(j.CreatedAt))
		toOnline = append(toOnline, online.Sub(j.CreatedAt))
		toStarted = append(toStarted, j.StartedAt.Sub(j.CreatedAt))
	}
	if len(missing) > 0 {
		return PeerLatency{}, onPeerPods, fmt.Errorf("jobs whose runner is not a pod ARC created: %s", strings.Join(missing, "; "))
	}
	return PeerLatency{
		ToPodCreate: summarize(toPod), ToOnline: summarize(toOnline), ToStarted: summarize(toStarted),
		AllStartedSeconds: round1(b.allStarted.Sub(b.start).Seconds()),
	}, onPeerPods, nil
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
