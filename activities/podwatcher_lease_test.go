package activities

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/workflows"
)

// electedReplica is one worker replica's elected pod watcher, with a Kubernetes connection the
// test can cut (the replica is then alive but partitioned from the API server).
type electedReplica struct {
	name   string
	leader prometheus.Gauge
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan error
}

func (e *env) startElected(t *testing.T, signals WorkflowSignaler, name string) *electedReplica {
	t.Helper()
	r := &electedReplica{name: name, leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader"}), done: make(chan error, 1)}
	cfg := rest.CopyConfig(testKube.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if r.cut.Load() {
				return nil, errPartitioned
			}
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				resp.Body = &cuttableBody{ReadCloser: resp.Body, cut: &r.cut}
			}
			return resp, err
		})
	})
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewPodWatcher(PodWatcherConfig{Client: kube, Temporal: signals, Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	elected, err := NewElectedPodWatcher(w, PodWatcherLease{Client: kube, Namespace: e.ns, Identity: name, Leader: r.leader})
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	go func() { r.done <- elected.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

var errPartitioned = errors.New("partitioned from the API server")

// cuttableBody fails reads once the connection is cut, so a watch open before the cut delivers
// nothing after it.
type cuttableBody struct {
	io.ReadCloser
	cut *atomic.Bool
}

func (b *cuttableBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.cut.Load() {
		return 0, errPartitioned
	}
	return n, err
}

func (r *electedReplica) leads() bool { return testutil.ToFloat64(r.leader) == 1 }

func (r *electedReplica) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("%s: %v", r.name, err)
	}
}

// leaderWatch samples which replicas lead until stopped, and remembers whether two ever led
// at once.
type leaderWatch struct {
	overlap atomic.Bool
	stop    func()
}

func watchLeaders(replicas []*electedReplica) *leaderWatch {
	lw := &leaderWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			n := 0
			for _, r := range replicas {
				if r.leads() {
					n++
				}
			}
			if n > 1 {
				lw.overlap.Store(true)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	lw.stop = func() { cancel(); wg.Wait() }
	return lw
}

func leaderAmong(t *testing.T, replicas []*electedReplica) *electedReplica {
	t.Helper()
	var leader *electedReplica
	waitFor(t, func() bool {
		for _, r := range replicas {
			if r.leads() {
				leader = r
				return true
			}
		}
		return false
	})
	return leader
}

// Replicas sharing the Lease: one leads and alone signals a pod's end; a leader stopped
// cleanly hands over within a read of the Lease; a leader cut off from the API server (alive,
// so it cannot release the Lease) stops leading before a standby takes the Lease once it
// expired, and the pod that ended meanwhile is signalled by the new leader's listing. Two
// replicas never lead at once. The takeover times are logged for docs/operations.md.
func TestElectedPodWatchersSignalEachPodEndOnce(t *testing.T) {
	e := newEnv(t)
	e.ctx = context.Background() // the fail-over below outlasts newEnv's minute
	rec := &recordingSignaler{signals: map[string][]workflows.PodStatusSignal{}}
	replicas := []*electedReplica{e.startElected(t, rec, "replica-a"), e.startElected(t, rec, "replica-b"), e.startElected(t, rec, "replica-c")}
	leaders := watchLeaders(replicas)
	leader := leaderAmong(t, replicas)

	first := e.podInput("pool-a-ab12-1")
	if _, err := e.k8s.CreateRunnerPod(e.ctx, first); err != nil {
		t.Fatal(err)
	}
	e.setPhase(first.Name, corev1.PodSucceeded, "")
	waitFor(t, func() bool { return rec.total() == 1 })
	// Its runner workflow ends it (the garbage collector deletes the pod), so the next leader's
	// listing does not find it ended and tell its closed workflow again.
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	stoppedAt := time.Now()
	leader.cancel()
	next := leaderAmong(t, without(replicas, leader))
	t.Logf("handover after a clean stop: %.2f s", time.Since(stoppedAt).Seconds())
	leader.stop(t)

	second := e.podInput("pool-a-ab12-2")
	if _, err := e.k8s.CreateRunnerPod(e.ctx, second); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	next.cut.Store(true)
	e.setPhase(second.Name, corev1.PodFailed, "Evicted")
	waitFor(t, func() bool { return !next.leads() })
	stoppedLeading := time.Since(cutAt)
	leaderAmong(t, without(replicas, leader, next))
	tookOver := time.Since(cutAt)
	waitFor(t, func() bool { return rec.total() == 2 })
	t.Logf("fail-over after the leader was cut off: it stopped leading after %.1f s, a standby led after %.1f s",
		stoppedLeading.Seconds(), tookOver.Seconds())

	leaders.stop()
	if leaders.overlap.Load() {
		t.Error("two replicas led at once")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, in := range []workflows.CreateRunnerPodInput{first, second} {
		if got := rec.signals[in.WorkflowID]; len(got) != 1 || got[0].Pod != in.Name {
			t.Errorf("%s: signals %+v, want one", in.Name, got)
		}
	}
	if rec.calls != 2 {
		t.Errorf("%d signal calls for two pod ends, want 2", rec.calls)
	}
}

func without(all []*electedReplica, drop ...*electedReplica) []*electedReplica {
	var out []*electedReplica
	for _, r := range all {
		keep := true
		for _, d := range drop {
			keep = keep && r != d
		}
		if keep {
			out = append(out, r)
		}
	}
	return out
}
