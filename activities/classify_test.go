package activities

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/runnerflow/runnerflow/workflows"
)

func githubResponse(status int) *http.Response {
	u, _ := url.Parse("https://api.github.com/orgs/acme/actions/runners/7")
	return &http.Response{StatusCode: status, Request: &http.Request{Method: http.MethodDelete, URL: u}}
}

func githubStatusError(status int) error {
	return &github.ErrorResponse{Response: githubResponse(status), Message: http.StatusText(status)}
}

func TestClassifyGitHubError(t *testing.T) {
	retryAfter := 42 * time.Second
	reset := time.Now().Add(30 * time.Minute)
	for _, tc := range []struct {
		name         string
		call         githubCall
		err          error
		wantType     string
		nonRetryable bool
		minDelay     time.Duration
		maxDelay     time.Duration
	}{
		{name: "primary rate limit waits for the reset", call: callGenerateJIT,
			err: &github.RateLimitError{Rate: github.Rate{Limit: 5000, Reset: github.Timestamp{Time: reset}},
				Response: githubResponse(http.StatusForbidden), Message: "API rate limit exceeded"},
			wantType: workflows.ErrRateLimited, minDelay: 29 * time.Minute, maxDelay: 30 * time.Minute},
		{name: "rate limit reset in the past retries soon", call: callGetRunner,
			err: &github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: time.Now().Add(-time.Minute)}},
				Response: githubResponse(http.StatusForbidden)},
			wantType: workflows.ErrRateLimited, minDelay: time.Second, maxDelay: time.Second},
		{name: "secondary rate limit honours Retry-After", call: callGenerateJIT,
			err:      &github.AbuseRateLimitError{Response: githubResponse(http.StatusForbidden), RetryAfter: &retryAfter},
			wantType: workflows.ErrRateLimited, minDelay: retryAfter, maxDelay: retryAfter},
		{name: "secondary rate limit without Retry-After waits a minute", call: callGenerateJIT,
			err:      &github.AbuseRateLimitError{Response: githubResponse(http.StatusForbidden)},
			wantType: workflows.ErrRateLimited, minDelay: time.Minute, maxDelay: time.Minute},
		{name: "wrapped rate limit is still found", call: callListRunners,
			err: fmt.Errorf("page 2: %w", &github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: reset}},
				Response: githubResponse(http.StatusForbidden)}),
			wantType: workflows.ErrRateLimited, minDelay: 29 * time.Minute, maxDelay: 30 * time.Minute},
		{name: "budget at its reserve waits for the reset, refused before GitHub", call: callGenerateJIT,
			err: &url.Error{Op: "Post", URL: "https://api.github.com/orgs/acme/actions/runners/generate-jitconfig",
				Err: &BudgetReserveError{Remaining: 1000, Reserve: 1000, Reset: reset}},
			wantType: workflows.ErrRateLimited, minDelay: 29 * time.Minute, maxDelay: 30 * time.Minute},
		{name: "422 on remove is a busy runner, retried", call: callRemoveRunner,
			err: githubStatusError(http.StatusUnprocessableEntity), wantType: workflows.ErrRunnerBusy},
		{name: "422 elsewhere is an invalid request", call: callGenerateJIT,
			err: githubStatusError(http.StatusUnprocessableEntity), wantType: workflows.ErrInvalidSpec, nonRetryable: true},
		{name: "404", call: callGetRunner, err: githubStatusError(http.StatusNotFound), wantType: workflows.ErrNotFound, nonRetryable: true},
		{name: "401", call: callGenerateJIT, err: githubStatusError(http.StatusUnauthorized), wantType: workflows.ErrForbidden, nonRetryable: true},
		{name: "403 without rate limit", call: callGenerateJIT, err: githubStatusError(http.StatusForbidden), wantType: workflows.ErrForbidden, nonRetryable: true},
		{name: "409 conflict retries", call: callGenerateJIT, err: githubStatusError(http.StatusConflict), wantType: workflows.ErrTransient},
		{name: "502 retries", call: callListRunners, err: githubStatusError(http.StatusBadGateway), wantType: workflows.ErrTransient},
		{name: "503 retries", call: callRemoveRunner, err: githubStatusError(http.StatusServiceUnavailable), wantType: workflows.ErrTransient},
		{name: "429 without headers", call: callListRunners, err: githubStatusError(http.StatusTooManyRequests),
			wantType: workflows.ErrRateLimited, minDelay: time.Minute, maxDelay: time.Minute},
		{name: "network error retries", call: callGetRunner, err: &url.Error{Op: "Get", URL: "https://api.github.com", Err: errors.New("connection refused")},
			wantType: workflows.ErrTransient},
		{name: "unknown runner group", call: callRunnerGroup, err: fmt.Errorf("%w: %q", ErrNoSuchRunnerGroup, "gpu"),
			wantType: workflows.ErrNotFound, nonRetryable: true},
		{name: "malformed scope", call: callGenerateJIT, err: fmt.Errorf("%w: x", ErrBadScope), wantType: workflows.ErrInvalidSpec, nonRetryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkClassified(t, classifyGitHubError(tc.call, tc.err), tc.wantType, tc.nonRetryable, tc.minDelay, tc.maxDelay)
		})
	}
	if classifyGitHubError(callGetRunner, nil) != nil {
		t.Error("nil error classified as an error")
	}
}

func TestClassifyKubernetesError(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name         string
		err          error
		wantType     string
		nonRetryable bool
		minDelay     time.Duration
		maxDelay     time.Duration
	}{
		{name: "not found", err: apierrors.NewNotFound(pods, "p"), wantType: workflows.ErrNotFound, nonRetryable: true},
		{name: "invalid pod", err: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p",
			field.ErrorList{field.Required(field.NewPath("spec", "containers"), "")}), wantType: workflows.ErrInvalidSpec, nonRetryable: true},
		{name: "bad request", err: apierrors.NewBadRequest("no"), wantType: workflows.ErrInvalidSpec, nonRetryable: true},
		{name: "forbidden without a reason given", err: apierrors.NewForbidden(pods, "p", errors.New("no verb create")), wantType: workflows.ErrForbidden, nonRetryable: true},
		{name: "unauthorized", err: apierrors.NewUnauthorized("who"), wantType: workflows.ErrForbidden, nonRetryable: true},
		{name: "throttled with a delay", err: apierrors.NewTooManyRequests("slow down", 7), wantType: workflows.ErrRateLimited,
			minDelay: 7 * time.Second, maxDelay: 7 * time.Second},
		{name: "conflict retries", err: apierrors.NewConflict(pods, "p", errors.New("modified")), wantType: workflows.ErrTransient},
		{name: "already exists retries", err: apierrors.NewAlreadyExists(pods, "p"), wantType: workflows.ErrTransient},
		{name: "internal error retries", err: apierrors.NewInternalError(errors.New("etcd")), wantType: workflows.ErrTransient},
		{name: "unavailable retries", err: apierrors.NewServiceUnavailable("starting"), wantType: workflows.ErrTransient},
		{name: "timeout retries", err: apierrors.NewTimeoutError("slow", 1), wantType: workflows.ErrTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkClassified(t, classifyKubernetesError("create pod ns/p", tc.err), tc.wantType, tc.nonRetryable, tc.minDelay, tc.maxDelay)
		})
	}
}

// The API server answers 403 Forbidden for an RBAC denial and for every admission refusal;
// only the quota's refusals that clear by themselves are waited for. The errors are built as
// kube-apiserver builds them (admission.NewForbidden, the RBAC authorizer's reason), with the
// plugins' own wording.
func TestClassifyKubernetesForbidden(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name         string
		err          error
		wantType     string
		nonRetryable bool
		minDelay     time.Duration
		maxDelay     time.Duration
		wantText     string
	}{
		{name: "pod quota exceeded waits", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New("exceeded quota: runners, requested: pods=1, used: pods=5, limited: pods=5")),
			wantType: workflows.ErrQuotaExceeded, minDelay: workflows.QuotaRetryInitial, maxDelay: workflows.QuotaRetryInitial,
			wantText: "exceeded quota: runners"},
		{name: "cpu quota exceeded waits", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New("exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=7, limited: requests.cpu=8")),
			wantType: workflows.ErrQuotaExceeded, minDelay: workflows.QuotaRetryInitial, maxDelay: workflows.QuotaRetryInitial},
		{name: "secret count quota exceeded waits", err: apierrors.NewForbidden(secrets, "ci-ab12-7",
			errors.New("exceeded quota: objects, requested: count/secrets=1, used: count/secrets=50, limited: count/secrets=50")),
			wantType: workflows.ErrQuotaExceeded, minDelay: workflows.QuotaRetryInitial, maxDelay: workflows.QuotaRetryInitial},
		{name: "quota not counted yet waits", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New("status unknown for quota: runners, resources: pods")),
			wantType: workflows.ErrQuotaExceeded, minDelay: workflows.QuotaRetryInitial, maxDelay: workflows.QuotaRetryInitial},
		{name: "RBAC denial fails fast and says so", err: apierrors.NewForbidden(pods, "",
			errors.New(`User "system:serviceaccount:runnerflow:runnerflow" cannot create resource "pods" in API group "" in the namespace "ci"`)),
			wantType: workflows.ErrForbidden, nonRetryable: true, wantText: "lacks this permission"},
		{name: "RBAC denial on secrets fails fast", err: apierrors.NewForbidden(secrets, "ci-ab12-7",
			errors.New(`User "runnerflow" cannot update resource "secrets" in API group "" in the namespace "ci"`)),
			wantType: workflows.ErrForbidden, nonRetryable: true, wantText: "lacks this permission"},
		{name: "a pod the quota cannot admit as written is an invalid spec", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New("failed quota: compute: must specify limits.cpu for: runner; limits.memory for: runner")),
			wantType: workflows.ErrInvalidSpec, nonRetryable: true, wantText: "must specify limits.cpu"},
		{name: "namespace being deleted fails fast", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New("unable to create new content in namespace ci because it is being terminated")),
			wantType: workflows.ErrForbidden, nonRetryable: true},
		{name: "PodSecurity fails fast", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New(`violates PodSecurity "restricted:latest": privileged (container "dind" must not set securityContext.privileged=true)`)),
			wantType: workflows.ErrForbidden, nonRetryable: true},
		{name: "an admission webhook's denial fails fast", err: apierrors.NewForbidden(pods, "ci-ab12-7",
			errors.New(`admission webhook "validate.kyverno.svc" denied the request: image registry not allowed`)),
			wantType: workflows.ErrForbidden, nonRetryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classifyKubernetesError("create pod ci/ci-ab12-7", tc.err)
			checkClassified(t, err, tc.wantType, tc.nonRetryable, tc.minDelay, tc.maxDelay)
			if !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), "create pod ci/ci-ab12-7") {
				t.Errorf("message %q lacks the call or %q", err.Error(), tc.wantText)
			}
		})
	}
}

// A refused pod is tried again sooner at first, then at most every QuotaRetryMax; the pool hears
// of the wait on the first refusal and a few more, never on every one.
func TestQuotaRetryPaceAndReports(t *testing.T) {
	for attempt, want := range map[int]time.Duration{
		0: workflows.QuotaRetryInitial, 1: workflows.QuotaRetryInitial, 2: 2 * workflows.QuotaRetryInitial,
		3: 4 * workflows.QuotaRetryInitial, 5: workflows.QuotaRetryMax, 1000: workflows.QuotaRetryMax,
	} {
		if got := workflows.QuotaRetryDelay(attempt); got != want {
			t.Errorf("QuotaRetryDelay(%d) = %s, want %s", attempt, got, want)
		}
	}
	var reported []int
	for attempt := 1; attempt <= 70; attempt++ {
		if workflows.QuotaReportAttempt(attempt) {
			reported = append(reported, attempt)
		}
	}
	if want := []int{1, 2, 4, 8, 16, 32, 64}; !slices.Equal(reported, want) {
		t.Errorf("attempts that report = %v, want %v", reported, want)
	}
}

func checkClassified(t *testing.T, err error, wantType string, nonRetryable bool, minDelay, maxDelay time.Duration) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("classified %v (%T), want an application error", err, err)
	}
	if app.Type() != wantType || app.NonRetryable() != nonRetryable {
		t.Errorf("type %q non-retryable %v, want %q %v (%v)", app.Type(), app.NonRetryable(), wantType, nonRetryable, err)
	}
	if d := app.NextRetryDelay(); d < minDelay || d > maxDelay {
		t.Errorf("next retry delay %s, want within [%s, %s]", d, minDelay, maxDelay)
	}
	// Waiting for a rate limit is the design, not a fault: it must not be logged as an error.
	wantBenign := wantType == workflows.ErrRateLimited || wantType == workflows.ErrQuotaExceeded
	if benign := app.Category() == temporal.ApplicationErrorCategoryBenign; wantBenign != benign && wantType != workflows.ErrRunnerBusy {
		t.Errorf("%s error benign = %v, want %v", wantType, benign, wantBenign)
	}
}

func TestWithoutSecretRedactsAndKeepsTheType(t *testing.T) {
	const jit = "eyJydW5uZXJfaWQiOjF9c2VjcmV0"
	in := temporal.NewApplicationErrorWithOptions("update secret: body "+jit+" too large", workflows.ErrQuotaExceeded,
		temporal.ApplicationErrorOptions{NextRetryDelay: 3 * time.Second, Category: temporal.ApplicationErrorCategoryBenign})
	out := withoutSecret(in, jit)
	if strings.Contains(out.Error(), jit) {
		t.Fatalf("error still carries the credential: %v", out)
	}
	var app *temporal.ApplicationError
	if !errors.As(out, &app) || app.Type() != workflows.ErrQuotaExceeded || app.NextRetryDelay() != 3*time.Second ||
		app.Category() != temporal.ApplicationErrorCategoryBenign {
		t.Errorf("redacted error lost its type, delay or category: %v", out)
	}
	if plain := withoutSecret(errors.New("x "+jit), jit); strings.Contains(plain.Error(), jit) {
		t.Errorf("plain error not redacted: %v", plain)
	}
}

// The Actions service's 400s that name their exception: an expired session is a lost one, a
// taken name is a set made meanwhile (retried, and adopted); any other 400 is a bad request.
func TestClassifyActionsBadRequests(t *testing.T) {
	for _, tc := range []struct {
		call actionsCall
		text string
		want string
	}{
		{callSessionQueue, "400: GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException, GitHub.Actions.Runtime.WebApi: expired", workflows.ErrSessionLost},
		{callEnsureScaleSet, "400: GitHub.Actions.Runtime.WebApi.RunnerScaleSetExistsException, GitHub.Actions.Runtime.WebApi: taken", workflows.ErrTransient},
		{callEnsureScaleSet, "400: GitHub.Actions.Runtime.WebApi.InvalidRequestException: no labels", workflows.ErrInvalidSpec},
		{callOpenSession, "400: GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException: expired", workflows.ErrInvalidSpec},
	} {
		err := classifyActionsError(tc.call, errors.New(tc.text), &answer{status: http.StatusBadRequest})
		if got := errType(err); got != tc.want {
			t.Errorf("%s: %q classified %s, want %s", tc.call.what, tc.text, got, tc.want)
		}
	}
}
