package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v92/github"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/workflows"
)

// GitHubActivities are the activities on workflows.GitHubTaskQueue, whose rate limit is the
// GitHub API budget. Kube is used only by RegisterRunner, to put the credential into a Secret.
type GitHubActivities struct {
	GitHub GitHub
	Kube   kubernetes.Interface
	// WarmNamespace is where warm registrations' Secrets are written
	// (RegisterRunnerInput.Warm): a namespace no runner's pod may read Secrets in. Empty keeps
	// them in the runner namespace, as before warm namespaces.
	WarmNamespace string
}

// Register registers the activities under their workflows.Activity* names.
func (a *GitHubActivities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.RegisterRunner, activity.RegisterOptions{Name: workflows.ActivityRegisterRunner})
	r.RegisterActivityWithOptions(a.GetRunner, activity.RegisterOptions{Name: workflows.ActivityGetRunner})
	r.RegisterActivityWithOptions(a.RemoveRunner, activity.RegisterOptions{Name: workflows.ActivityRemoveRunner})
	r.RegisterActivityWithOptions(a.ListRunners, activity.RegisterOptions{Name: workflows.ActivityListRunners})
	r.RegisterActivityWithOptions(a.PullJobs, activity.RegisterOptions{Name: workflows.ActivityPullJobs})
	r.RegisterActivityWithOptions(a.ReadJobs, activity.RegisterOptions{Name: workflows.ActivityReadJobs})
	r.RegisterActivityWithOptions(a.ReadRunGraph, activity.RegisterOptions{Name: workflows.ActivityReadRunGraph})
}

// GetRunner reads a runner's status, by id or (id unknown, registration-token mode) by name.
// A runner GitHub does not know is Found: false, not an error.
func (a *GitHubActivities) GetRunner(ctx context.Context, in workflows.RunnerRef) (workflows.GetRunnerOutput, error) {
	r, found, err := a.findRunner(ctx, in)
	if err != nil || !found {
		return workflows.GetRunnerOutput{}, err
	}
	return workflows.GetRunnerOutput{Found: true, RunnerID: r.ID, Online: r.Online, Busy: r.Busy}, nil
}

// RemoveRunner removes a runner's registration. GitHub answers 422 while the runner runs a job:
// that is RunnerBusy, retried by the workflow's policy until the job ends. A runner already
// gone (404; GitHub removes an ephemeral runner after its job) is success.
//
// With the id known it is one DELETE (a 404 says the same as a GET would); only a runner whose
// id was never learned (registration-token mode) is looked up by name first.
func (a *GitHubActivities) RemoveRunner(ctx context.Context, in workflows.RunnerRef) (workflows.RemoveRunnerOutput, error) {
	if err := in.Scope.Validate(); err != nil {
		return workflows.RemoveRunnerOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	id := in.RunnerID
	if id == 0 {
		r, found, err := a.findRunner(ctx, in)
		if err != nil || !found {
			return workflows.RemoveRunnerOutput{}, err
		}
		id = r.ID
	}
	err := a.GitHub.RemoveRunner(ctx, in.Scope, id)
	if isGitHubStatus(err, http.StatusNotFound) {
		return workflows.RemoveRunnerOutput{}, nil
	}
	if err != nil {
		return workflows.RemoveRunnerOutput{}, classifyGitHubError(callRemoveRunner, err)
	}
	return workflows.RemoveRunnerOutput{Removed: true}, nil
}

// ListRunners lists a scope's runners whose names start with in.NamePrefix (and with one of
// in.NamePrefixes when set), sorted by name: one paginated listing, O(scopes) calls rather than
// O(runners).
func (a *GitHubActivities) ListRunners(ctx context.Context, in workflows.ListRunnersInput) (workflows.ListRunnersResult, error) {
	if err := in.Scope.Validate(); err != nil {
		return workflows.ListRunnersResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	all, err := a.GitHub.ListRunners(ctx, in.Scope, "")
	if err != nil {
		return workflows.ListRunnersResult{}, classifyGitHubError(callListRunners, err)
	}
	var out workflows.ListRunnersResult
	for _, r := range all {
		if in.Keeps(r.Name) {
			out.Runners = append(out.Runners, workflows.RunnerListing{Name: r.Name, ID: r.ID, Online: r.Online, Busy: r.Busy})
		}
	}
	slices.SortFunc(out.Runners, func(a, b workflows.RunnerListing) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// findRunner looks a runner up by id when known, else by name (one filtered listing).
func (a *GitHubActivities) findRunner(ctx context.Context, in workflows.RunnerRef) (RunnerInfo, bool, error) {
	if err := in.Scope.Validate(); err != nil {
		return RunnerInfo{}, false, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	if in.RunnerID != 0 {
		r, err := a.GitHub.GetRunner(ctx, in.Scope, in.RunnerID)
		switch {
		case isGitHubStatus(err, http.StatusNotFound):
			return RunnerInfo{}, false, nil
		case err != nil:
			return RunnerInfo{}, false, classifyGitHubError(callGetRunner, err)
		}
		return r, true, nil
	}
	runners, err := a.GitHub.ListRunners(ctx, in.Scope, in.Name)
	if err != nil {
		return RunnerInfo{}, false, classifyGitHubError(callListRunners, err)
	}
	for _, r := range runners {
		if strings.EqualFold(r.Name, in.Name) { // GitHub's runner names are case-insensitive
			return r, true, nil
		}
	}
	return RunnerInfo{}, false, nil
}

// githubCall names a GitHub operation for error messages and says what a 422 means for it.
type githubCall struct {
	what string
	// on422 is the error type of a 422 answer: InvalidSpec, except for removing a runner,
	// where GitHub answers 422 while the runner runs a job.
	on422 string
}

var (
	callGenerateJIT   = githubCall{what: "generate JIT runner configuration", on422: workflows.ErrInvalidSpec}
	callRegToken      = githubCall{what: "create registration token", on422: workflows.ErrInvalidSpec}
	callRunnerGroup   = githubCall{what: "resolve runner group", on422: workflows.ErrInvalidSpec}
	callGetRunner     = githubCall{what: "get runner", on422: workflows.ErrInvalidSpec}
	callListRunners   = githubCall{what: "list runners", on422: workflows.ErrInvalidSpec}
	callRemoveRunner  = githubCall{what: "remove runner", on422: workflows.ErrRunnerBusy}
	minRateLimitDelay = time.Second
)

// classifyGitHubError is the one place GitHub errors become Temporal application errors. The
// type decides what the workflow does; the retry delay comes from the server when it gave one.
// go-github's messages carry method, sanitized URL, status and GitHub's message: no credential.
func classifyGitHubError(call githubCall, err error) error {
	if err == nil {
		return nil
	}
	msg := call.what + ": " + err.Error()
	var (
		rateLimit *github.RateLimitError
		abuse     *github.AbuseRateLimitError
		resp      *github.ErrorResponse
		reserve   *BudgetReserveError
	)
	switch {
	case errors.As(err, &reserve):
		// Refused here, not by GitHub: the hour's budget is down to the share kept for others.
		return retryAfter(msg, workflows.ErrRateLimited, time.Until(reserve.Reset))
	case errors.As(err, &rateLimit):
		// go-github also returns this without calling GitHub while it knows the budget is spent.
		return retryAfter(msg, workflows.ErrRateLimited, time.Until(rateLimit.Rate.Reset.Time))
	case errors.As(err, &abuse):
		delay := time.Minute // GitHub's advice when a secondary limit names no Retry-After
		if abuse.RetryAfter != nil {
			delay = *abuse.RetryAfter
		}
		return retryAfter(msg, workflows.ErrRateLimited, delay)
	case errors.Is(err, ErrNoSuchRunnerGroup):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrNotFound, nil)
	case errors.Is(err, ErrBadScope):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrInvalidSpec, nil)
	case errors.As(err, &resp) && resp.Response != nil:
		return classifyGitHubStatus(call, msg, resp.Response.StatusCode)
	}
	// Network errors, timeouts, a malformed answer: worth another try.
	return temporal.NewApplicationError(msg, workflows.ErrTransient)
}

func classifyGitHubStatus(call githubCall, msg string, status int) error {
	switch {
	case status == http.StatusNotFound:
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrNotFound, nil)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrForbidden, nil)
	case status == http.StatusUnprocessableEntity && call.on422 == workflows.ErrRunnerBusy:
		// Expected while a job runs (possibly for hours): benign, so it is not logged as an error.
		return temporal.NewApplicationErrorWithOptions(msg, workflows.ErrRunnerBusy,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
	case status == http.StatusUnprocessableEntity || status == http.StatusBadRequest:
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrInvalidSpec, nil)
	case status == http.StatusTooManyRequests:
		return retryAfter(msg, workflows.ErrRateLimited, time.Minute)
	}
	// 409 and 5xx: GitHub's state moved or GitHub is unwell; back off and retry.
	return temporal.NewApplicationError(msg, workflows.ErrTransient)
}

// retryAfter is a retryable error whose next attempt waits for delay (at least a second). It is
// benign: waiting for GitHub's budget is runnerflow working as designed, so the SDK does not log
// it as an activity error.
func retryAfter(msg, errType string, delay time.Duration) error {
	if delay < minRateLimitDelay {
		delay = minRateLimitDelay
	}
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s (retry in %s)", msg, delay.Round(time.Second)), errType,
		temporal.ApplicationErrorOptions{NextRetryDelay: delay, Category: temporal.ApplicationErrorCategoryBenign})
}

// isGitHubStatus reports whether err is GitHub's answer with the given status.
func isGitHubStatus(err error, status int) bool {
	var resp *github.ErrorResponse
	return errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode == status
}
