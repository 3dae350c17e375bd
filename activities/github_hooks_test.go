package activities

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// failingHookDouble is a double with an App whose hook answered 503 to the queued events of
// jobs jobs of acme/app.
func failingHookDouble(t *testing.T, jobs int) (*githubdouble.Server, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	gh, err := githubdouble.Start(githubdouble.Config{
		Tokens: []string{testToken}, WebhookURL: down.URL, WebhookSecret: "s",
		App: &githubdouble.AppConfig{ID: 11, InstallationID: 22, PublicKey: &key.PublicKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	for range jobs {
		if _, err := gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"nobody-has-it"}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := gh.WaitForDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
	return gh, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// The listing follows GitHub's cursor back to the window's start (two pages for 120 attempts),
// stops at MaxPages (reported truncated), and a redelivery through the organization's hook is
// then one more attempt of the same event.
func TestHookActivitiesListEveryPageAndRedeliver(t *testing.T) {
	const jobs = 120
	gh, _ := failingHookDouble(t, jobs)
	api, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	a := &HookActivities{Hooks: api}
	ctx := context.Background()
	hook := workflows.HookRef{Organization: "acme", ID: 1}
	since := time.Now().Add(-time.Hour)
	all, err := a.ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: hook, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if all.Pages != 2 || all.Truncated || all.Listed != jobs || len(all.Failed) != jobs {
		t.Fatalf("listing: %d pages, truncated %t, %d listed, %d failed; want 2 pages, all %d failed", all.Pages, all.Truncated, all.Listed, len(all.Failed), jobs)
	}
	one, err := a.ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: hook, Since: since, MaxPages: 1})
	if err != nil || one.Pages != 1 || !one.Truncated || one.Listed != workflows.ReconcileDeliveryPageSize {
		t.Fatalf("one page: %+v, %v; want a truncated page of %d", one.DeliverySummary, err, workflows.ReconcileDeliveryPageSize)
	}
	oldest := all.Failed[0]
	if _, err := a.RedeliverHookDelivery(ctx, workflows.RedeliverHookDeliveryInput{Hook: hook, DeliveryID: oldest.DeliveryID, GUID: oldest.GUID}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := gh.WaitForDeliveries(wait); err != nil {
		t.Fatal(err)
	}
	after, err := a.ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: hook, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if after.Newest == nil || after.Newest.GUID != oldest.GUID || !after.Newest.Redelivery || after.Failed[0].GUID != oldest.GUID || !after.Failed[0].Redelivered {
		t.Errorf("after the redelivery: newest %+v, oldest failed %+v; want the event redelivered (and failed again)", after.Newest, after.Failed[0])
	}
	_, err = a.ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: workflows.HookRef{Organization: "acme", ID: 2}, Since: since})
	if app := (*temporal.ApplicationError)(nil); !errors.As(err, &app) || app.Type() != workflows.ErrNotFound {
		t.Errorf("an unknown hook: %v, want NotFound", err)
	}
}

// The App's own hook is read as the App (a JWT); a worker with a token cannot, and says why.
func TestHookActivitiesAppHook(t *testing.T) {
	gh, key := failingHookDouble(t, 3)
	api, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), AppID: 11, InstallationID: 22, PrivateKeyPEM: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app := workflows.HookRef{App: true}
	got, err := (&HookActivities{Hooks: api}).ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: app, Since: time.Now().Add(-time.Hour)})
	if err != nil || len(got.Failed) != 3 {
		t.Fatalf("the App's hook: %+v, %v; want the 3 failed events", got.DeliverySummary, err)
	}
	if _, err := (&HookActivities{Hooks: api}).RedeliverHookDelivery(ctx, workflows.RedeliverHookDeliveryInput{Hook: app, DeliveryID: got.Failed[0].DeliveryID}); err != nil {
		t.Errorf("redeliver through the App's hook: %v", err)
	}
	token, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&HookActivities{Hooks: token}).ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: app})
	if app := (*temporal.ApplicationError)(nil); !errors.As(err, &app) || app.Type() != workflows.ErrForbidden || !app.NonRetryable() {
		t.Errorf("the App's hook with a token: %v, want Forbidden, not retried", err)
	}
}

// A ping of the organization's hook is one more delivery, the hook's newest (the receiver
// still answers 503: a failed ping); the App's webhook has no ping, which is said and not
// retried.
func TestHookActivitiesPing(t *testing.T) {
	gh, key := failingHookDouble(t, 1)
	api, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), AppID: 11, InstallationID: 22, PrivateKeyPEM: key})
	if err != nil {
		t.Fatal(err)
	}
	a := &HookActivities{Hooks: api}
	ctx := context.Background()
	hook := workflows.HookRef{Organization: "acme", ID: 1}
	if _, err := a.PingHook(ctx, workflows.PingHookInput{Hook: hook}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := gh.WaitForDeliveries(wait); err != nil {
		t.Fatal(err)
	}
	got, err := a.ListHookDeliveries(ctx, workflows.ListHookDeliveriesInput{Hook: hook, Since: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Newest == nil || got.Newest.Event != "ping" || got.Newest.Succeeded() || len(got.Failed) != 1 {
		t.Errorf("after the ping: newest %+v, %d failed events; want the failed ping, the job's event still failed", got.Newest, len(got.Failed))
	}
	_, err = a.PingHook(ctx, workflows.PingHookInput{Hook: workflows.HookRef{App: true}})
	if app := (*temporal.ApplicationError)(nil); !errors.As(err, &app) || app.Type() != workflows.ErrForbidden || !app.NonRetryable() {
		t.Errorf("a ping of the App's hook: %v, want Forbidden, not retried", err)
	}
}
