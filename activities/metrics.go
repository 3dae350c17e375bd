package activities

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of one GitHub API call, the bounded values of the result label.
const (
	ResultOK           = "ok"
	ResultRateLimited  = "rate_limited"
	ResultClientError  = "client_error"
	ResultServerError  = "server_error"
	ResultNetworkError = "network_error"
)

// Metrics are the worker's series about the systems its activities call. They are counted in
// HTTP transports, below every client, so each request is counted once however it was made
// (activity, pod watcher, token refresh) and retries count as the calls they are.
type Metrics struct {
	githubRequests *prometheus.CounterVec
	githubRemain   prometheus.Gauge
	kubeErrors     *prometheus.CounterVec
	// podWatcherLeader is 1 while this replica holds a cluster's pod watcher Lease.
	podWatcherLeader *prometheus.GaugeVec
}

// NewMetrics creates the series and registers them with reg (the registry /metrics serves).
// Registering twice with one registry (two workers in one process) shares the series; a nil
// reg leaves them unregistered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		githubRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnerflow_github_requests_total",
			Help: "GitHub API requests by endpoint (route template) and result.",
		}, []string{"endpoint", "result"}),
		githubRemain: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runnerflow_github_rate_limit_remaining",
			Help: "Requests left in GitHub's current rate-limit window, from the last API response.",
		}),
		kubeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnerflow_kubernetes_errors_total",
			Help: "Failed Kubernetes API requests by verb, resource and cluster (empty: the default cluster; expected NotFound and AlreadyExists excluded).",
		}, []string{"verb", "resource", "cluster"}),
		podWatcherLeader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runnerflow_pod_watcher_leader",
			Help: "1 while this worker replica holds a cluster's pod watcher Lease and signals runner workflows about that cluster's pods, 0 while it stands by (cluster empty: the default cluster).",
		}, []string{"cluster"}),
	}
	if reg != nil {
		m.githubRequests = register(reg, m.githubRequests)
		m.githubRemain = register(reg, m.githubRemain)
		m.kubeErrors = register(reg, m.kubeErrors)
		m.podWatcherLeader = register(reg, m.podWatcherLeader)
	}
	return m
}

// PodWatcherLeader is the gauge the default cluster's ElectedPodWatcher keeps; nil for nil
// Metrics.
func (m *Metrics) PodWatcherLeader() prometheus.Gauge { return m.PodWatcherLeaderFor("") }

// PodWatcherLeaderFor is the gauge a cluster's ElectedPodWatcher keeps ("" is the default
// cluster); nil for nil Metrics. Cluster names come from the worker's configuration: bounded.
func (m *Metrics) PodWatcherLeaderFor(cluster string) prometheus.Gauge {
	if m == nil {
		return nil
	}
	return m.podWatcherLeader.WithLabelValues(cluster)
}

// register registers c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var exists prometheus.AlreadyRegisteredError
		if errors.As(err, &exists) {
			if prev, ok := exists.ExistingCollector.(C); ok {
				return prev
			}
		}
		panic(err) // a name clash with another type is a programming error
	}
	return c
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// GitHubTransport counts every GitHub API request by route template and result, and keeps the
// rate-limit gauge from the responses' X-RateLimit-Remaining. Use it as GitHubConfig.Transport
// (it then sits below authentication, so App token requests are counted too).
func (m *Metrics) GitHubTransport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		endpoint := GitHubEndpoint(r)
		resp, err := next.RoundTrip(r)
		m.githubRequests.WithLabelValues(endpoint, githubResult(resp, err)).Inc()
		// App endpoints (installation tokens) answer with the App's own budget, not the
		// installation's that the activities spend.
		if resp != nil && !isAppEndpoint(endpoint) {
			if v, perr := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining")); perr == nil {
				m.githubRemain.Set(float64(v))
			}
		}
		return resp, err
	})
}

// githubResult classifies one answer. A 403 or 429 is a rate limit when GitHub says so: no
// requests remaining, or a Retry-After (secondary limit).
func githubResult(resp *http.Response, err error) string {
	switch {
	case err != nil:
		return ResultNetworkError
	case resp.StatusCode < 400:
		return ResultOK
	case (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) &&
		(resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""):
		return ResultRateLimited
	case resp.StatusCode < 500:
		return ResultClientError
	}
	return ResultServerError
}

// KubernetesTransport counts failed Kubernetes API requests by verb and resource; use it
// with rest.Config.Wrap. Answers runnerflow's idempotent paths expect are not failures:
// NotFound on get and delete (the object is gone: create it, or done) and AlreadyExists on
// create (adopt it). A request cancelled by its caller (a watch closed at shutdown) is not
// one either. The requests are the default cluster's.
func (m *Metrics) KubernetesTransport(next http.RoundTripper) http.RoundTripper {
	return m.KubernetesTransportFor("")(next)
}

// KubernetesTransportFor is KubernetesTransport for a named cluster's client: its failures
// carry the cluster's name.
func (m *Metrics) KubernetesTransportFor(cluster string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(r)
			verb, resource := kubernetesRequest(r)
			if kubernetesFailed(verb, resp, err) && !errors.Is(r.Context().Err(), context.Canceled) {
				m.kubeErrors.WithLabelValues(verb, resource, cluster).Inc()
			}
			return resp, err
		})
	}
}

func kubernetesFailed(verb string, resp *http.Response, err error) bool {
	switch {
	case err != nil:
		return true
	case resp.StatusCode < 400:
		return false
	case resp.StatusCode == http.StatusNotFound && (verb == "get" || verb == "delete"):
		return false
	case resp.StatusCode == http.StatusConflict && verb == "create":
		return false
	}
	return true
}
