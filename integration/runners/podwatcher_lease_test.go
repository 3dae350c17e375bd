package runners

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestOneElectedPodWatcherSignalsEachPodEnd runs several worker replicas sharing the pod
// watcher's Lease, as a Deployment does: the worker binary (the first leader) and in-process
// workers standing by. Each runner's pod end reaches its workflow as exactly one signal,
// counted in the runner's history, whatever the number of replicas; the leader's death
// (SIGKILL: the Lease is never released and must expire) and a clean stop (the Lease is
// released) each leave a pod that ended while nobody watched, and the next leader's listing
// signals it, once. The takeover times are logged, never asserted: they are the fail-over gap
// docs/operations.md quotes.
func TestOneElectedPodWatcherSignalsEachPodEnd(t *testing.T) {
	s := newScenario(t, "lease")
	c := dialTemporal(t)
	bin := buildWorker(t)
	first := startWorkerProcess(t, bin, s.ns, 1)
	eventually(t, time.Minute, "the worker binary to take the Lease", func() bool { return s.leaseHolder() != "" })
	standbys := []*replica{startReplica(t, s.ns, "lease-a"), startReplica(t, s.ns, "lease-b")}

	// Three replicas, one leader: each pod's end is one signal.
	var inputs []workflows.RunnerInput
	for i := range 3 {
		inputs = append(inputs, s.input(int64(i+1), true, map[string]string{simulator.AnnotationWorkDuration: "1s"}))
	}
	runs := s.start(c, inputs...)
	s.queueJobs(len(inputs))
	for _, r := range results(t, runs, 3*time.Minute) {
		if r.FinalState != workflows.RunnerDone || r.Reason != "pod succeeded" {
			t.Errorf("runner %s ended %+v, want done after its pod succeeded", r.Name, r)
		}
	}
	for _, run := range runs {
		if got := podSignals(t, c, run); len(got) != 1 {
			t.Errorf("%s got %d pod-status signals from %v, want 1 with three replicas", run.GetID(), len(got), got)
		}
	}
	if n := leaders(t, standbys); n != 0 {
		t.Errorf("%d standbys lead while the worker binary holds the Lease", n)
	}

	// The leader dies: its Lease runs out, a standby takes it and signals the pod that ended
	// in between.
	crashed := s.runUntilOnline(c, 4)
	killedAt := time.Now()
	first.kill()
	s.queueJobs(1)
	podEnded := s.waitPodSucceeded(crashed.input.Name)
	eventually(t, time.Minute, "a standby to take the Lease", func() bool { return leaders(t, standbys) == 1 })
	tookOver := time.Since(killedAt)
	t.Logf("fail-over after the leader was killed: %.1f s (its pod ended %.1f s after the kill, %s the takeover)",
		tookOver.Seconds(), podEnded.Sub(killedAt).Seconds(), beforeOrAfter(podEnded, killedAt.Add(tookOver)))
	s.assertSignalledOnceBy(c, crashed, leaderOf(t, standbys).identity)

	// The leader stops cleanly: it releases the Lease and the other standby takes it at once.
	leader, other := leaderOf(t, standbys), otherThan(t, standbys)
	stoppedAt := time.Now()
	leader.cancel()
	eventually(t, time.Minute, "the last standby to take the released Lease", func() bool { return other.leads(t) })
	t.Logf("handover after a clean stop: %.1f s", time.Since(stoppedAt).Seconds())
	leader.stop()

	// The last replica stops cleanly; a pod ends while none runs; the next replica to start
	// takes the released Lease without waiting for it to expire and signals that pod.
	alone := s.runUntilOnline(c, 5)
	other.stop()
	s.queueJobs(1)
	s.waitPodSucceeded(alone.input.Name)
	startedAt := time.Now()
	next := startReplica(t, s.ns, "lease-c")
	eventually(t, time.Minute, "the new replica to take the released Lease", func() bool { return next.leads(t) })
	t.Logf("a replica started after a clean stop led after %.1f s", time.Since(startedAt).Seconds())
	s.assertSignalledOnceBy(c, alone, next.identity)
	s.assertCleanEnd(c, append(runs, crashed.run, alone.run))
}

// replica is an in-process worker with a registry of its own, so its pod watcher leader gauge
// says whether it leads. cancel stops it as SIGTERM does; stop also waits until it has.
type replica struct {
	identity string
	registry *prometheus.Registry
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
}

func startReplica(t *testing.T, namespace, identity string) *replica {
	t.Helper()
	r := &replica{identity: identity, registry: prometheus.NewRegistry(), done: make(chan struct{})}
	app, err := workerapp.New(workerapp.Config{
		TemporalAddress: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Kube: world.Kube.Config, WatchNamespace: namespace, Identity: identity, Metrics: r.registry,
		GitHub: activities.GitHubConfig{BaseURL: world.GitHub.URL(), Token: world.GitHubToken}, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		r.err = app.Run(ctx)
	}()
	t.Cleanup(func() {
		if r.stop(); r.err != nil {
			t.Errorf("worker %s: %v", r.identity, r.err)
		}
	})
	return r
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
}

func (r *replica) leads(t *testing.T) bool {
	t.Helper()
	families, err := r.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "runnerflow_pod_watcher_leader" { // the default cluster's only
			return len(f.GetMetric()) == 1 && f.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	t.Fatalf("worker %s exports no runnerflow_pod_watcher_leader", r.identity)
	return false
}

func leaders(t *testing.T, replicas []*replica) int {
	t.Helper()
	n := 0
	for _, r := range replicas {
		if r.leads(t) {
			n++
		}
	}
	return n
}

func leaderOf(t *testing.T, replicas []*replica) *replica {
	t.Helper()
	for _, r := range replicas {
		if r.leads(t) {
			return r
		}
	}
	t.Fatal("no replica leads")
	return nil
}

func otherThan(t *testing.T, replicas []*replica) *replica {
	t.Helper()
	for _, r := range replicas {
		if !r.leads(t) {
			return r
		}
	}
	t.Fatal("every replica leads")
	return nil
}

// leaseHolder is who holds the scenario's pod watcher Lease, empty if nobody does.
func (s *scenario) leaseHolder() string {
	lease, err := world.Kubernetes.CoordinationV1().Leases(s.ns).Get(context.Background(),
		activities.DefaultPodWatcherLeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

type startedRunner struct {
	input workflows.RunnerInput
	run   client.WorkflowRun
}

// runUntilOnline starts runner seq and waits until it is online at GitHub with no job yet, so
// the test decides when its pod's run ends: when it queues the job (1 s of work).
func (s *scenario) runUntilOnline(c client.Client, seq int64) startedRunner {
	s.t.Helper()
	in := s.input(seq, true, map[string]string{simulator.AnnotationWorkDuration: "1s"})
	r := startedRunner{input: in, run: s.start(c, in)[0]}
	eventually(s.t, 2*time.Minute, "runner "+in.Name+" to be online", func() bool {
		for _, reg := range s.registrations() {
			if reg.Name == in.Name && reg.Status == "online" {
				return true
			}
		}
		return false
	})
	return r
}

// waitPodSucceeded waits until the runner's pod has ended and returns when it was seen so.
func (s *scenario) waitPodSucceeded(name string) time.Time {
	s.t.Helper()
	eventually(s.t, time.Minute, "pod "+name+" to succeed", func() bool {
		pod, err := world.Kubernetes.CoreV1().Pods(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodSucceeded
	})
	return time.Now()
}

// assertSignalledOnceBy waits for the runner to end by its pod and checks that exactly one
// pod-status signal reached it, from the named worker.
func (s *scenario) assertSignalledOnceBy(c client.Client, r startedRunner, identity string) {
	s.t.Helper()
	res := results(s.t, []client.WorkflowRun{r.run}, 2*time.Minute)[0]
	if res.FinalState != workflows.RunnerDone || res.Reason != "pod succeeded" {
		s.t.Errorf("runner %s ended %+v, want done after its pod succeeded", res.Name, res)
	}
	if got := podSignals(s.t, c, r.run); len(got) != 1 || got[0] != identity {
		s.t.Errorf("%s got pod-status signals from %v, want one from %s", r.run.GetID(), got, identity)
	}
}

// podSignals are the identities of the senders of the pod-status signals in the run's history.
func podSignals(t *testing.T, c client.Client, run client.WorkflowRun) []string {
	t.Helper()
	var out []string
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalPodStatus {
			out = append(out, a.GetIdentity())
		}
	}
	return out
}

func beforeOrAfter(at, mark time.Time) string {
	if at.Before(mark) {
		return "before"
	}
	return "after"
}
