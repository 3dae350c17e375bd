package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v92/github"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/runnerflow/runnerflow/workflows"
)

// HookDeliveries is the part of GitHub's REST API that redelivers a webhook's failed
// deliveries: the hook's delivery attempts, newest first, a page at a time (cursor
// pagination), and a redelivery of one attempt.
type HookDeliveries interface {
	// ListHookDeliveries reads one page of the hook's attempts from cursor ("" is the newest)
	// and returns the next page's cursor ("" after the last page).
	ListHookDeliveries(ctx context.Context, hook workflows.HookRef, cursor string) ([]workflows.HookAttempt, string, error)
	// RedeliverHookDelivery asks GitHub to send an attempt's payload again (GitHub answers 202
	// and delivers it on its own time).
	RedeliverHookDelivery(ctx context.Context, hook workflows.HookRef, deliveryID int64) error
	// PingHook asks GitHub to send the hook a ping event (an organization's or a repository's
	// hook; GitHub has no ping for an App's webhook).
	PingHook(ctx context.Context, hook workflows.HookRef) error
}

var _ HookDeliveries = (*GitHubClient)(nil)

// ErrNoAppCredential: the App's own webhook was named, but the worker authenticates with a
// token; only the App (its JWT) may read its hook's deliveries.
var ErrNoAppCredential = errors.New("the App's webhook needs the worker to authenticate as that GitHub App")

// appJWTClient is a client authenticated as the App itself (a JWT signed with its key), which
// GitHub requires for the App's own endpoints such as /app/hook/deliveries; installation
// tokens are refused there.
func appJWTClient(cfg GitHubConfig, key []byte, transport http.RoundTripper, base string, opts []github.ClientOptionsFunc) (*github.Client, error) {
	atr, err := ghinstallation.NewAppsTransport(transport, cfg.AppID, key)
	if err != nil {
		return nil, fmt.Errorf("github: App private key: %w", err)
	}
	atr.BaseURL = base
	c, err := github.NewClient(append(slices.Clone(opts), github.WithTransport(atr))...)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	return c, nil
}

// ListHookDeliveries implements HookDeliveries.
func (c *GitHubClient) ListHookDeliveries(ctx context.Context, hook workflows.HookRef, cursor string) ([]workflows.HookAttempt, string, error) {
	opts := &github.ListCursorOptions{Cursor: cursor, PerPage: workflows.ReconcileDeliveryPageSize}
	var (
		page []*github.HookDelivery
		resp *github.Response
		err  error
	)
	switch {
	case hook.App && c.appJWT == nil:
		return nil, "", ErrNoAppCredential
	case hook.App:
		page, resp, err = c.appJWT.Apps.ListHookDeliveries(ctx, opts)
	case hook.Organization != "":
		page, resp, err = c.gh.Organizations.ListHookDeliveries(ctx, hook.Organization, hook.ID, opts)
	default:
		owner, repo, splitErr := splitRepo(hook.Repository)
		if splitErr != nil {
			return nil, "", splitErr
		}
		page, resp, err = c.gh.Repositories.ListHookDeliveries(ctx, owner, repo, hook.ID, opts)
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]workflows.HookAttempt, 0, len(page))
	for _, d := range page {
		out = append(out, workflows.HookAttempt{
			ID: d.GetID(), GUID: d.GetGUID(), At: d.GetDeliveredAt().Time, Redelivery: d.GetRedelivery(),
			StatusCode: d.GetStatusCode(), Event: d.GetEvent(), Action: d.GetAction(),
		})
	}
	return out, resp.Cursor, nil
}

// RedeliverHookDelivery implements HookDeliveries. GitHub answers 202 Accepted, which
// go-github reports as *AcceptedError: that is the success.
func (c *GitHubClient) RedeliverHookDelivery(ctx context.Context, hook workflows.HookRef, deliveryID int64) error {
	var err error
	switch {
	case hook.App && c.appJWT == nil:
		return ErrNoAppCredential
	case hook.App:
		_, _, err = c.appJWT.Apps.RedeliverHookDelivery(ctx, deliveryID)
	case hook.Organization != "":
		_, _, err = c.gh.Organizations.RedeliverHookDelivery(ctx, hook.Organization, hook.ID, deliveryID)
	default:
		owner, repo, splitErr := splitRepo(hook.Repository)
		if splitErr != nil {
			return splitErr
		}
		_, _, err = c.gh.Repositories.RedeliverHookDelivery(ctx, owner, repo, hook.ID, deliveryID)
	}
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return nil
	}
	return err
}

// ErrNoPing: GitHub pings organization and repository hooks only, not an App's webhook.
var ErrNoPing = errors.New("GitHub has no ping for an App's webhook")

// PingHook implements HookDeliveries. GitHub answers 204 and delivers the ping on its own time;
// the hook's deliveries then list it.
func (c *GitHubClient) PingHook(ctx context.Context, hook workflows.HookRef) error {
	var err error
	switch {
	case hook.App:
		return ErrNoPing
	case hook.Organization != "":
		_, err = c.gh.Organizations.PingHook(ctx, hook.Organization, hook.ID)
	default:
		owner, repo, splitErr := splitRepo(hook.Repository)
		if splitErr != nil {
			return splitErr
		}
		_, err = c.gh.Repositories.PingHook(ctx, owner, repo, hook.ID)
	}
	return err
}

// HookActivities are reconcile's redelivery activities, on workflows.GitHubTaskQueue (paced
// with every other GitHub call).
type HookActivities struct {
	Hooks HookDeliveries
}

// Register registers the activities under their workflows.Activity* names.
func (a *HookActivities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.ListHookDeliveries, activity.RegisterOptions{Name: workflows.ActivityListHookDeliveries})
	r.RegisterActivityWithOptions(a.RedeliverHookDelivery, activity.RegisterOptions{Name: workflows.ActivityRedeliverHookDelivery})
	r.RegisterActivityWithOptions(a.PingHook, activity.RegisterOptions{Name: workflows.ActivityPingHook})
}

var (
	callListDeliveries = githubCall{what: "list webhook deliveries", on422: workflows.ErrInvalidSpec}
	callRedeliver      = githubCall{what: "redeliver webhook delivery", on422: workflows.ErrInvalidSpec}
	callPing           = githubCall{what: "ping webhook", on422: workflows.ErrInvalidSpec}
)

// ListHookDeliveries reads the hook's attempts, newest first, page after page until one reaches
// back before in.Since (or in.MaxPages ran out), and returns their summary: only the events
// that need a redelivery travel into the workflow's history, not the whole listing.
func (a *HookActivities) ListHookDeliveries(ctx context.Context, in workflows.ListHookDeliveriesInput) (workflows.ListHookDeliveriesResult, error) {
	if err := in.Hook.Validate(); err != nil {
		return workflows.ListHookDeliveriesResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	maxPages := in.MaxPages
	if maxPages <= 0 {
		maxPages = workflows.ReconcileDeliveryPages
	}
	var (
		all    []workflows.HookAttempt
		cursor string
		out    workflows.ListHookDeliveriesResult
	)
	for {
		page, next, err := a.Hooks.ListHookDeliveries(ctx, in.Hook, cursor)
		if err != nil {
			return out, classifyHookError(callListDeliveries, err)
		}
		out.Pages++
		all = append(all, page...)
		reachedSince := len(page) > 0 && page[len(page)-1].At.Before(in.Since)
		if next == "" || len(page) == 0 || reachedSince {
			break
		}
		if out.Pages >= maxPages {
			out.Truncated = true
			break
		}
		cursor = next
	}
	out.DeliverySummary = workflows.SummarizeDeliveries(all, in.Since)
	return out, nil
}

// RedeliverHookDelivery asks GitHub for one more attempt of a delivery: one POST, never retried
// by its policy (a retry after a lost answer would redeliver twice).
func (a *HookActivities) RedeliverHookDelivery(ctx context.Context, in workflows.RedeliverHookDeliveryInput) (workflows.RedeliverHookDeliveryResult, error) {
	if err := in.Hook.Validate(); err != nil {
		return workflows.RedeliverHookDeliveryResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	if err := a.Hooks.RedeliverHookDelivery(ctx, in.Hook, in.DeliveryID); err != nil {
		return workflows.RedeliverHookDeliveryResult{}, classifyHookError(callRedeliver, err)
	}
	return workflows.RedeliverHookDeliveryResult{}, nil
}

// PingHook asks GitHub to ping the hook: one POST whose only effect is a ping delivery, so a
// retry costs nothing but a second ping.
func (a *HookActivities) PingHook(ctx context.Context, in workflows.PingHookInput) (workflows.PingHookResult, error) {
	if err := in.Hook.Validate(); err != nil {
		return workflows.PingHookResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	if err := a.Hooks.PingHook(ctx, in.Hook); err != nil {
		return workflows.PingHookResult{}, classifyHookError(callPing, err)
	}
	return workflows.PingHookResult{}, nil
}

// classifyHookError is classifyGitHubError, and a worker without the App's credential cannot
// read the App's hook whatever it retries.
func classifyHookError(call githubCall, err error) error {
	if errors.Is(err, ErrNoAppCredential) || errors.Is(err, ErrNoPing) {
		return temporal.NewNonRetryableApplicationError(call.what+": "+err.Error(), workflows.ErrForbidden, nil)
	}
	return classifyGitHubError(call, err)
}
