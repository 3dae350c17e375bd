package activities

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The GitHub counters must agree with what GitHub (the double) counted: same route templates,
// same number of calls per result, and the last remaining budget it announced.
func TestGitHubRequestsCountedByRouteTemplateAndResult(t *testing.T) {
	const limit = 6
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{testToken}, RateLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	api, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: testToken, Transport: m.GitHubTransport(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := workflows.Scope{Repository: "acme/app"}
	jit, err := api.CreateJITConfig(ctx, acme, JITRequest{Name: "m-1", RunnerGroupID: 1, Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.ListRunners(ctx, acme, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := api.GetRunner(ctx, repo, 424242); err == nil {
		t.Fatal("reading a runner that does not exist succeeded")
	}
	if err := api.RemoveRunner(ctx, acme, jit.Runner.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateRegistrationToken(ctx, repo); err != nil {
		t.Fatal(err)
	}
	// The sixth call spends the budget. go-github then refuses locally (no request, nothing to
	// count), so a second client that has not seen the limit makes the call GitHub refuses.
	if _, err := api.ListRunners(ctx, repo, ""); err != nil {
		t.Fatal(err)
	}
	fresh, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: testToken, Transport: m.GitHubTransport(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.ListRunners(ctx, repo, ""); err == nil {
		t.Fatal("a call beyond the budget succeeded")
	}

	wantResult := map[int]string{200: ResultOK, 201: ResultOK, 204: ResultOK, 404: ResultClientError, 403: ResultRateLimited}
	total := 0
	for key, n := range gh.Calls() {
		result, ok := wantResult[key.Status]
		if !ok {
			t.Fatalf("unexpected GitHub answer %d on %s", key.Status, key.Route)
		}
		if got := testutil.ToFloat64(m.githubRequests.WithLabelValues(key.Route, result)); got != float64(n) {
			t.Errorf("%s answered %d %d times; counted %v as %s", key.Route, key.Status, n, got, result)
		}
		total += n
	}
	if got := testutil.CollectAndCount(m.githubRequests); got != len(gh.Calls()) {
		t.Errorf("%d series for %d (route, status) pairs GitHub saw", got, len(gh.Calls()))
	}
	if total != limit+1 {
		t.Errorf("GitHub saw %d calls, want %d", total, limit+1)
	}
	if got := testutil.ToFloat64(m.githubRemain); got != 0 {
		t.Errorf("remaining budget %v after spending it, want 0", got)
	}
	lint(t, reg)
}

func TestGitHubEndpointTemplates(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"POST", "https://api.github.com/orgs/acme/actions/runners/generate-jitconfig", "POST /orgs/{org}/actions/runners/generate-jitconfig"},
		{"GET", "https://api.github.com/repos/acme/app/actions/runners?per_page=100&name=x", "GET /repos/{owner}/{repo}/actions/runners"},
		{"DELETE", "https://ghe.example.com/api/v3/enterprises/big/actions/runners/17", "DELETE /enterprises/{enterprise}/actions/runners/{runner_id}"},
		{"POST", "https://ghe.example.com/api/v3/app/installations/5/access_tokens", "POST /app/installations/{installation_id}/access_tokens"},
		{"GET", "https://api.github.com/orgs/acme/actions/runner-groups?per_page=100", "GET /orgs/{org}/actions/runner-groups"},
		{"GET", "https://api.github.com/user", EndpointOther},
		{"PUT", "https://api.github.com/orgs/acme/actions/runners", EndpointOther},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := GitHubEndpoint(&http.Request{Method: tc.method, URL: u}); got != tc.want {
			t.Errorf("%s %s: endpoint %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

// Kubernetes errors are counted by verb and resource against a real API server; the answers
// runnerflow's idempotent paths expect are not errors.
func TestKubernetesErrorsCountedByVerbAndResource(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cfg := rest.CopyConfig(testKube.Config)
	cfg.Wrap(m.KubernetesTransport)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := testKube.NewNamespace(t)
	ctx := context.Background()
	pods := kube.CoreV1().Pods(ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "runner", Image: "runner:1"}},
	}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := pods.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get missing: %v", err)
	}
	if err := pods.Delete(ctx, "missing", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("delete missing: %v", err)
	}
	if got := testutil.CollectAndCount(m.kubeErrors); got != 0 {
		t.Fatalf("expected answers counted as errors: %d series", got)
	}

	invalid := pod.DeepCopy()
	invalid.Name = "Not_A_DNS_Name"
	if _, err := pods.Create(ctx, invalid, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid pod: %v", err)
	}
	stale := created.DeepCopy()
	stale.ResourceVersion = "1"
	stale.Labels = map[string]string{"x": "y"}
	if _, err := pods.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := pods.UpdateStatus(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale status update: %v", err)
	}
	for _, series := range [][2]string{{"create", "pods"}, {"update", "pods"}, {"update", "pods/status"}} {
		if got := testutil.ToFloat64(m.kubeErrors.WithLabelValues(series[0], series[1], "")); got != 1 {
			t.Errorf("%s %s errors: %v, want 1", series[0], series[1], got)
		}
	}
	if got := testutil.CollectAndCount(m.kubeErrors); got != 3 {
		t.Errorf("%d error series, want 3", got)
	}
	lint(t, reg)
}

func TestNewMetricsSharesSeriesOfOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.githubRequests.WithLabelValues("GET /orgs/{org}/actions/runners", ResultOK).Inc()
	if got := testutil.ToFloat64(b.githubRequests.WithLabelValues("GET /orgs/{org}/actions/runners", ResultOK)); got != 1 {
		t.Errorf("second Metrics of one registry sees %v, want the first one's 1", got)
	}
}

// lint runs Prometheus' metric linter over every series in reg.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "runnerflow_") {
			t.Errorf("series %s is not runnerflow's", f.GetName())
		}
	}
}

// CreateRunnerPod reports when the pod was created (the scale-up latency's pod stage): its own
// clock for a new pod, the pod's creation timestamp for an adopted one.
func TestCreateRunnerPodReportsItsCreationTime(t *testing.T) {
	e := newEnv(t)
	before := time.Now()
	in := e.podInput("created-at")
	first, err := e.k8s.CreateRunnerPod(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if first.CreatedAt.Before(before) || first.CreatedAt.After(time.Now()) {
		t.Errorf("created at %s, not during the call", first.CreatedAt)
	}
	again, err := e.k8s.CreateRunnerPod(e.ctx, in)
	if err != nil || !again.Adopted {
		t.Fatalf("adopt: %+v, %v", again, err)
	}
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.CreatedAt.Equal(pod.CreationTimestamp.Time) {
		t.Errorf("adopted pod created at %s, its timestamp says %s", again.CreatedAt, pod.CreationTimestamp)
	}
}
