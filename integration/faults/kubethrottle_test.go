package faults

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// throttleFor is how long the API server's proxy refuses every other request: long enough for
// every kind of Kubernetes call of a burst (pod and Secret writes, the pod watcher's lists and
// watches, the Lease) to meet refusals.
const throttleFor = 45 * time.Second

// kubeFaultProxy stands between the worker and the API server and, while refusing is set,
// answers every other request itself: 429 with Retry-After (the API server's priority and
// fairness turning a client away) and 503 (an API server that is overloaded or restarting)
// in turn. The simulator (the kubelet) and the garbage collector reach the API server
// directly, as they would on nodes and the control plane.
type kubeFaultProxy struct {
	refusing atomic.Bool
	seen     atomic.Int64
	refused  atomic.Int64
}

func startKubeFaultProxy(t *testing.T) (*kubeFaultProxy, *rest.Config) {
	t.Helper()
	target, err := url.Parse(world.Kube.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(world.Kube.Config) // the proxy carries the worker's identity
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream through at once
	p := &kubeFaultProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.seen.Add(1)
		if p.refusing.Load() && n%2 == 0 {
			p.refused.Add(1)
			if n%4 == 0 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too many requests","reason":"TooManyRequests","code":429}`, http.StatusTooManyRequests)
				return
			}
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"service unavailable","reason":"ServiceUnavailable","code":503}`, http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: world.Kube.Config.QPS, Burst: world.Kube.Config.Burst}
	return p, cfg
}

// TestAPIServerThrottlingMidBurst: for 45 s in the middle of a burst of 20 jobs, half of the
// worker's Kubernetes requests are refused, with 429 and Retry-After or with 503. Pod and
// Secret writes are retried (client-go's own retries on Retry-After, then the activity's
// policy), the pod watcher re-lists and watches again, the Lease is renewed or lost and taken
// again. Every job runs once, one runner per job, nothing is left behind.
func TestAPIServerThrottlingMidBurst(t *testing.T) {
	proxy, kube := startKubeFaultProxy(t)
	s := newSystemVia(t, "fa-throttle", kube)
	s.apply(workFor(20*time.Second), nil)
	jobs := s.queueJobs(20)
	s.eventually("the burst under way (jobs running, others still waiting)", func() bool {
		return count(jobs, githubdouble.StatusInProgress)+count(jobs, githubdouble.StatusCompleted) >= 3
	})
	proxy.refusing.Store(true)
	time.Sleep(throttleFor) // the throttling itself
	proxy.refusing.Store(false)
	t.Logf("the proxy refused %d of %d requests; %d jobs queued, %d running, %d done", proxy.refused.Load(), proxy.seen.Load(),
		count(jobs, githubdouble.StatusQueued), count(jobs, githubdouble.StatusInProgress), count(jobs, githubdouble.StatusCompleted))
	if proxy.refused.Load() == 0 {
		t.Fatal("the proxy refused nothing: the worker made no Kubernetes call while it refused")
	}
	s.checkAllClean(jobs)
}
