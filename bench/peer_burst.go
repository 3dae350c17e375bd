package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// peerSystem is what a peer does its own way in a burst; runPeerBurst does the rest, the same
// for every peer.
type peerSystem interface {
	world() *peerWorld
	stop()
	logTails() string
	// setUp creates the burst's pools, pool i keeping b.warm[i] runners, and waits until the
	// peer would hear of a job queued for them.
	setUp(ctx context.Context, b *peerBurst) error
	// queue queues the burst's jobs at the double and returns them with the instant "all
	// started" and the burst's length count from.
	queue(b *peerBurst) (jobs []int64, from time.Time, err error)
	// atRest is one look at the peer's objects: true once it is back to the pools' warm
	// runners (none when cold), with nothing else left.
	atRest(ctx context.Context, b *peerBurst) (bool, error)
	// starts returns, for each job, the instant its figure 1 starts at.
	starts(b *peerBurst) func(githubdouble.Job) (time.Time, error)
	// ownCosts adds what only this peer spends (webhooks, the Actions service) to res.
	ownCosts(b *peerBurst, res *PeerBurstResult)
	// tearDown deletes the burst's pools.
	tearDown(b *peerBurst)
}

// peerSpec is what tells one peer's bursts apart in the progress lines and the audit log.
type peerSpec struct {
	// label, pools, from and settling fill the progress lines: "ARC burst of 4 jobs across 2
	// runner deployments", "started 3.1s after the first webhook", "waiting for ARC to scale down".
	label, pools, from, settling string
	// prefix begins the burst's pool names; runners is the resource whose creation is a runner
	// lifecycle; runnerPods selects the runner pods of the peer's namespace (empty: every pod).
	prefix, runners, runnerPods string
	// writer names the peer's own users of the audit log, with a tag for some (testworld's users).
	writer func(user string) (tag string, ok bool)
}

// peerBurst is one burst of queued jobs in a peer's world.
type peerBurst struct {
	w     *peerWorld
	sys   peerSystem
	n     int
	pools []string
	// warm is, per pool, the runners it keeps ready; warmReady how many were when the jobs
	// were queued.
	warm      []int
	warmReady int
	jobs      []int64
	// start is just before the first job was queued; from is where the peer's "all started"
	// counts from (the first webhook released, or start where the peer takes no webhooks).
	start, from, allStarted time.Time
}

// runPeerBurst measures figures 1, 2 and 4 for a peer exactly as env.burst does for runnerflow:
// n jobs queued at once across two fresh pools, each keeping its share of --warm runners
// ready, until every job ran and the peer is back to those warm runners with nothing else left.
func runPeerBurst(ctx context.Context, sys peerSystem, n int) (PeerBurstResult, error) {
	w := sys.world()
	s := w.spec
	ctx, cancel := context.WithTimeout(ctx, w.opts.PhaseTimeout)
	defer cancel()
	b := &peerBurst{w: w, sys: sys, n: n, warm: warmShares(w.opts.Warm, n, burstPools)}
	defer b.tearDown()
	for i := range burstPools {
		pool := fmt.Sprintf("%s%d-%c", s.prefix, n, 'a'+i)
		if err := w.gh.AddRepository(githubdouble.RepositorySpec{FullName: burstOrg(pool) + "/app"}); err != nil {
			return PeerBurstResult{}, err
		}
		b.pools = append(b.pools, pool)
	}
	if err := sys.setUp(ctx, b); err != nil {
		return PeerBurstResult{}, err
	}
	if err := b.waitWarm(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	w.say("%s burst of %d jobs across %d %s: queueing", s.label, n, len(b.pools), s.pools)
	w.gh.ResetCalls()
	b.start = time.Now()
	var err error
	if b.jobs, b.from, err = sys.queue(b); err != nil {
		return PeerBurstResult{}, err
	}
	if b.allStarted, err = waitJobsStarted(ctx, w.gh, b.jobs); err != nil {
		return PeerBurstResult{}, err
	}
	w.say("%s burst of %d: every job started %.1fs after %s; waiting for %s", s.label, n, b.allStarted.Sub(b.from).Seconds(), s.from, s.settling)
	if err := b.waitSettled(ctx); err != nil {
		return PeerBurstResult{}, err
	}
	end := time.Now()
	w.say("%s burst of %d: settled after %.1fs; reading the audit log", s.label, n, end.Sub(b.from).Seconds())
	return b.measure(end)
}

// warmShares splits --warm over a burst's pools as queueBurst spreads the jobs (job i to pool
// i mod pools), so no pool keeps more warm runners than it gets jobs: a warm count above the
// burst is cut to the burst, since a runner beyond it would only wait.
func warmShares(warm, jobs, pools int) []int {
	warm = min(max(warm, 0), jobs)
	shares := make([]int, pools)
	for i := range shares {
		shares[i] = warm / pools
		if i < warm%pools {
			shares[i]++
		}
	}
	return shares
}

// readyRunners counts, per organization (lower case), the runners ready for a job: registered
// at the double, online and idle, with their pod (of the same name) running.
func readyRunners(runners []githubdouble.Runner, pods []corev1.Pod) map[string]int {
	running := map[string]bool{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running[p.Name] = true
		}
	}
	ready := map[string]int{}
	for _, r := range runners {
		if r.Status == "online" && !r.Busy && running[r.Name] {
			ready[strings.ToLower(r.Scope.Name)]++
		}
	}
	return ready
}

// warmWanted is how many warm runners the burst's pools keep between them.
func (b *peerBurst) warmWanted() int {
	n := 0
	for _, w := range b.warm {
		n += w
	}
	return n
}

// warmAt is one look at whether every pool has its warm runners ready, and how many are.
func (b *peerBurst) warmAt(ctx context.Context) (bool, int, error) {
	pods, err := b.w.client.CoreV1().Pods(b.w.ns).List(ctx, metav1.ListOptions{LabelSelector: b.w.spec.runnerPods})
	if err != nil {
		return false, 0, err
	}
	ready, total := readyRunners(b.w.gh.Runners(), pods.Items), 0
	all := true
	for i, pool := range b.pools {
		n := ready[strings.ToLower(burstOrg(pool))]
		all = all && n >= b.warm[i]
		total += n
	}
	return all, total, nil
}

// waitWarm waits until every pool has its warm runners ready (at once when cold): the jobs
// are queued only then, so a warm burst measures runners that were already waiting.
func (b *peerBurst) waitWarm(ctx context.Context) error {
	if b.warmWanted() == 0 {
		return nil
	}
	began := time.Now()
	err := pollEvery(ctx, time.Second, fmt.Sprintf("%d warm runners to be ready", b.warmWanted()), func() (ok bool, err error) {
		ok, b.warmReady, err = b.warmAt(ctx)
		return ok, err
	})
	if err == nil {
		b.w.say("%s burst of %d: %d warm runners ready in %.1fs", b.w.spec.label, b.n, b.warmReady, time.Since(began).Seconds())
	}
	return err
}

// waitSettled waits until every job completed and the peer is back at rest with its warm
// runners ready again (its scale-down waits for its delay after the last scale-out, and looks
// again at the latest after its sync period).
func (b *peerBurst) waitSettled(ctx context.Context) error {
	return pollEvery(ctx, time.Second, b.w.spec.settling, func() (bool, error) {
		for _, id := range b.jobs {
			if j, _ := b.w.gh.Job(id); j.Status != githubdouble.StatusCompleted {
				return false, nil
			}
		}
		if ok, err := b.sys.atRest(ctx, b); !ok || err != nil {
			return false, err
		}
		if b.warmWanted() == 0 {
			return true, nil
		}
		ok, _, err := b.warmAt(ctx)
		return ok, err
	})
}

// tearDown deletes the burst's pools and waits until their runner pods are gone (at once when
// cold: the burst settled with none), so they do not load the next burst nor count in it.
func (b *peerBurst) tearDown() {
	b.sys.tearDown(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := poll(ctx, "the burst's runner pods to go", func() (bool, error) {
		pods, err := b.w.client.CoreV1().Pods(b.w.ns).List(ctx, metav1.ListOptions{LabelSelector: b.w.spec.runnerPods})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		b.w.log.Warn("runner pods outlived the burst", "error", err)
	}
}

// measure reads the double's counters, the audit log and the simulator's online times.
func (b *peerBurst) measure(end time.Time) (PeerBurstResult, error) {
	res := PeerBurstResult{Jobs: b.n, Pools: len(b.pools), Warm: b.warmReady, Seconds: round1(end.Sub(b.from).Seconds())}
	writes, err := b.w.kube.AuditedWrites()
	if err != nil {
		return res, err
	}
	var ours []testworld.AuditedWrite
	podCreated := map[string]time.Time{}
	for _, wr := range writes {
		own := wr.User == testworld.ARCControllerUser && wr.Code/100 == 2
		if own && wr.Key() == "create pods" {
			// Of any time: a warm runner's pod was created before the burst.
			podCreated[wr.Name] = wr.At
		}
		if wr.At.Before(b.start) || wr.At.After(end) {
			continue
		}
		ours = append(ours, wr)
		if own && wr.Key() == "create "+b.w.spec.runners {
			res.Runners++
		}
	}
	res.GitHub = githubCost(b.w.gh, res.Runners, b.n)
	res.Kubernetes, res.GarbageCollectorWrites = peerKubernetesCost(ours, res.Runners, b.n, b.w.spec.writer)
	b.sys.ownCosts(b, &res)
	return res, b.latencies(podCreated, &res)
}

// latencies pairs, per job, the start of its figure 1 (the peer's) with the creation of the
// pod of the runner that ran it (the peer's pod create call, from the audit log), the runner
// coming online (the simulator) and the job starting (the double). It also counts the jobs
// whose runner is a pod the peer created, which must be all of them, and those among them
// whose runner was warm.
func (b *peerBurst) latencies(podCreated map[string]time.Time, res *PeerBurstResult) error {
	startOf := b.sys.starts(b)
	var toPod, toOnline, toStarted []time.Duration
	var missing []string
	for _, id := range b.jobs {
		j, _ := b.w.gh.Job(id)
		from, err := startOf(j)
		if err != nil {
			return err
		}
		created, ok := podCreated[j.RunnerName]
		if !ok {
			missing = append(missing, fmt.Sprintf("job %d ran on %q", id, j.RunnerName))
			continue
		}
		res.JobsOnPeerPods++
		online, ok := b.w.online.at(j.RunnerName)
		if !ok {
			return fmt.Errorf("job %d: runner %q was never seen coming online", id, j.RunnerName)
		}
		// A warm runner was up before its job was queued, and may take the job before its
		// webhook reaches the peer: what it did before the job's start waited on nothing, 0.
		since := func(t time.Time) time.Duration { return t.Sub(from) }
		if created.Before(b.start) {
			since = func(t time.Time) time.Duration { return max(t.Sub(from), 0) }
			res.JobsOnWarmRunners++
		}
		toPod = append(toPod, since(created))
		toOnline = append(toOnline, since(online))
		toStarted = append(toStarted, since(j.StartedAt))
	}
	if len(missing) > 0 {
		return fmt.Errorf("jobs whose runner is not a pod ARC created: %s", strings.Join(missing, "; "))
	}
	res.Latency = PeerLatency{
		ToPodCreate: summarize(toPod), ToOnline: summarize(toOnline), ToStarted: summarize(toStarted),
		AllStartedSeconds: round1(b.allStarted.Sub(b.from).Seconds()),
	}
	return nil
}

// garbageCollectorTag marks the garbage collector's writes among a peer's.
const garbageCollectorTag = "garbage collector"

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
