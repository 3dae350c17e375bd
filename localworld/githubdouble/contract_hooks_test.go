package githubdouble

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v92/github"
)

// hookDeliveryOperations are the webhook deliveries operations the double serves.
func hookDeliveryOperations() []specOperation {
	var ops []specOperation
	for _, hook := range []string{"/app/hook", "/orgs/{org}/hooks/{hook_id}", "/repos/{owner}/{repo}/hooks/{hook_id}"} {
		ops = append(ops, specOperation{"get", hook + "/deliveries"}, specOperation{"post", hook + "/deliveries/{delivery_id}/attempts"})
	}
	// The App's webhook has no ping: GitHub pings only organization and repository hooks.
	return append(ops, specOperation{"post", "/orgs/{org}/hooks/{hook_id}/pings"}, specOperation{"post", "/repos/{owner}/{repo}/hooks/{hook_id}/pings"})
}

// expectAccepted fails the test unless a redelivery was answered 202, which go-github reports
// as *AcceptedError.
func expectAccepted(t *testing.T, what string, resp *github.Response, err error) {
	t.Helper()
	if _, ok := err.(*github.AcceptedError); !ok {
		t.Fatalf("%s: %v, want GitHub's 202", what, err)
	}
	expectStatus(t, what, resp, nil, http.StatusAccepted)
}

// driveHookDeliveries fails three events' deliveries (the receiver answers 503), lists them
// through the organization's, the repository's and the App's hook, page by page with the
// cursor, redelivers one through each, and checks that a redelivery is the same event (its
// guid) flagged as a redelivery. Then the limits: the budget and the secondary limit.
func driveHookDeliveries(t *testing.T, w *world, rec *recorder) {
	ctx := context.Background()
	hr := newHookReceiver(t)
	hr.answer(http.StatusServiceUnavailable)
	w.SetWebhookURL(hr.URL)
	defer w.SetWebhookURL("")
	for _, repo := range []string{"acme/app", "acme/lib", "solo/tool"} {
		if _, err := w.QueueJob(JobSpec{Repository: repo, Labels: []string{"no-runner-has-this"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitHooks(t, w.Server)
	hr.answer(http.StatusAccepted)

	gh := w.client(testToken, rec)
	first, resp, err := gh.Organizations.ListHookDeliveries(ctx, "acme", hookID, &github.ListCursorOptions{PerPage: 1})
	expectStatus(t, "list the organization hook's deliveries", resp, err, http.StatusOK)
	if len(first) != 1 || resp.Cursor == "" {
		t.Fatalf("page 1 of acme's deliveries: %d items, cursor %q; want 1 and a next page", len(first), resp.Cursor)
	}
	second, resp, err := gh.Organizations.ListHookDeliveries(ctx, "acme", hookID, &github.ListCursorOptions{PerPage: 1, Cursor: resp.Cursor})
	expectStatus(t, "list the organization hook's deliveries, next page", resp, err, http.StatusOK)
	if len(second) != 1 || resp.Cursor != "" || second[0].GetID() >= first[0].GetID() {
		t.Fatalf("page 2 of acme's deliveries: %+v, cursor %q; want the older one and no next page", second, resp.Cursor)
	}
	failed := first[0]
	if failed.GetStatusCode() != http.StatusServiceUnavailable || failed.GetRedelivery() || failed.GetEvent() != "workflow_job" || failed.GetAction() != "queued" {
		t.Fatalf("a failed delivery listed as %+v", failed)
	}
	_, resp, err = gh.Organizations.RedeliverHookDelivery(ctx, "acme", hookID, failed.GetID())
	expectAccepted(t, "redeliver through the organization hook", resp, err)
	waitHooks(t, w.Server)
	latest, resp, err := gh.Organizations.ListHookDeliveries(ctx, "acme", hookID, nil)
	expectStatus(t, "list after the redelivery", resp, err, http.StatusOK)
	if len(latest) != 3 || latest[0].GetGUID() != failed.GetGUID() || !latest[0].GetRedelivery() || latest[0].GetStatusCode() != http.StatusAccepted {
		t.Fatalf("after the redelivery the newest attempt is %+v; want guid %s, a redelivery answered 202", latest[0], failed.GetGUID())
	}
	got := hr.all()
	if last := got[len(got)-1]; last.header.Get("X-GitHub-Delivery") != failed.GetGUID() {
		t.Fatalf("the redelivery arrived as delivery %q, want the event's guid %s", last.header.Get("X-GitHub-Delivery"), failed.GetGUID())
	}

	solo, resp, err := gh.Repositories.ListHookDeliveries(ctx, "solo", "tool", hookID, nil)
	expectStatus(t, "list the repository hook's deliveries", resp, err, http.StatusOK)
	if len(solo) != 1 {
		t.Fatalf("solo/tool's hook lists %d deliveries, want its one event", len(solo))
	}
	_, resp, err = gh.Repositories.RedeliverHookDelivery(ctx, "solo", "tool", hookID, solo[0].GetID())
	expectAccepted(t, "redeliver through the repository hook", resp, err)
	_, resp, err = gh.Organizations.ListHookDeliveries(ctx, "acme", hookID+1, nil)
	expectStatus(t, "list an unknown hook", resp, err, http.StatusNotFound)
	_, resp, err = gh.Repositories.RedeliverHookDelivery(ctx, "solo", "tool", hookID, second[0].GetID())
	expectStatus(t, "redeliver another repository's delivery", resp, err, http.StatusNotFound)

	atr := ghinstallation.NewAppsTransportFromPrivateKey(rec, testAppID, testAppKey)
	atr.BaseURL = strings.TrimSuffix(w.URL(), "/")
	app := w.client("", atr)
	all, resp, err := app.Apps.ListHookDeliveries(ctx, nil)
	expectStatus(t, "list the App hook's deliveries", resp, err, http.StatusOK)
	if len(all) < 4 || all[len(all)-1].GetInstallationID() != testInstallationID {
		t.Fatalf("the App's hook lists %d deliveries (%+v), want every event's, with the installation", len(all), all)
	}
	_, resp, err = app.Apps.RedeliverHookDelivery(ctx, all[len(all)-1].GetID())
	expectAccepted(t, "redeliver through the App's hook", resp, err)
	waitHooks(t, w.Server)
	driveHookPings(t, w, gh)
	driveHookDeliveryLimits(t, rec)
}

// driveHookPings pings the organization's and a repository's hook: each answers 204, and the
// ping is then that hook's newest delivery (event ping, answered by the receiver), listed by
// that hook only. An unknown hook is 404.
func driveHookPings(t *testing.T, w *world, gh *github.Client) {
	ctx := context.Background()
	resp, err := gh.Organizations.PingHook(ctx, "acme", hookID)
	expectStatus(t, "ping the organization hook", resp, err, http.StatusNoContent)
	waitHooks(t, w.Server)
	latest, resp, err := gh.Organizations.ListHookDeliveries(ctx, "acme", hookID, nil)
	expectStatus(t, "list after the organization ping", resp, err, http.StatusOK)
	if len(latest) == 0 || latest[0].GetEvent() != "ping" || latest[0].GetStatusCode() != http.StatusAccepted || latest[0].GetRedelivery() {
		t.Fatalf("after a ping the organization hook's newest delivery is %+v; want the ping, answered 202", latest)
	}
	resp, err = gh.Repositories.PingHook(ctx, "solo", "tool", hookID)
	expectStatus(t, "ping the repository hook", resp, err, http.StatusNoContent)
	waitHooks(t, w.Server)
	solo, resp, err := gh.Repositories.ListHookDeliveries(ctx, "solo", "tool", hookID, nil)
	expectStatus(t, "list after the repository ping", resp, err, http.StatusOK)
	if len(solo) == 0 || solo[0].GetEvent() != "ping" {
		t.Fatalf("after a ping the repository hook's newest delivery is %+v; want the ping", solo)
	}
	acme, resp, err := gh.Organizations.ListHookDeliveries(ctx, "acme", hookID, nil)
	expectStatus(t, "list the organization hook after the repository ping", resp, err, http.StatusOK)
	if acme[0].GetID() != latest[0].GetID() {
		t.Fatalf("the repository's ping is listed by the organization hook: %+v", acme[0])
	}
	resp, err = gh.Organizations.PingHook(ctx, "acme", hookID+1)
	expectStatus(t, "ping an unknown hook", resp, err, http.StatusNotFound)
}

// driveHookDeliveryLimits: the deliveries endpoints spend the hour's budget and the secondary
// limit's points like every REST endpoint (a redelivery is a write, 5 points).
func driveHookDeliveryLimits(t *testing.T, rec *recorder) {
	ctx := context.Background()
	limited := startWorld(t, Config{Tokens: []string{"ghp_small"}, RateLimit: 1})
	_, resp, err := limited.client("ghp_small", rec).Organizations.ListHookDeliveries(ctx, "acme", hookID, nil)
	expectStatus(t, "deliveries: last call of the budget", resp, err, http.StatusOK)
	_, resp, err = limited.client("ghp_small", rec).Organizations.ListHookDeliveries(ctx, "acme", hookID, nil)
	expectStatus(t, "deliveries: call over the budget", resp, err, http.StatusForbidden)

	points := startWorld(t, Config{SecondaryPointsPerMinute: 5})
	_, resp, err = points.client(testToken, rec).Organizations.RedeliverHookDelivery(ctx, "acme", hookID, 1)
	expectStatus(t, "redelivery of an unknown delivery, within the points", resp, err, http.StatusNotFound)
	_, resp, err = points.client(testToken, rec).Organizations.ListHookDeliveries(ctx, "acme", hookID, nil)
	expectStatus(t, "deliveries over the points", resp, err, http.StatusForbidden)
}
