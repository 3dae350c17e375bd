package githubdouble

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-github/v92/github"
)

// GitHub's documented test vector for X-Hub-Signature-256.
func TestSignMatchesGitHubTestVector(t *testing.T) {
	got := Sign("It's a Secret to Everybody", []byte("Hello, World!"))
	want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestWebhookSignatureVerifiesWithGoGitHub(t *testing.T) {
	const secret = "webhook-secret"
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookSecret: secret, WebhookWorkers: 1})
	job, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	got := hr.all()
	if len(got) != 1 {
		t.Fatalf("received %d deliveries, want 1", len(got))
	}
	h := got[0]
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(h.body))
	req.Header = h.header
	payload, err := github.ValidatePayload(req, []byte(secret))
	if err != nil {
		t.Fatalf("github.ValidatePayload: %v", err)
	}
	if !strings.HasPrefix(h.header.Get("User-Agent"), "GitHub-Hookshot/") || h.header.Get("X-GitHub-Delivery") == "" {
		t.Fatalf("headers %v", h.header)
	}
	ev, err := github.ParseWebHook(github.WebHookType(req), payload)
	if err != nil {
		t.Fatal(err)
	}
	wj, ok := ev.(*github.WorkflowJobEvent)
	if !ok || wj.GetAction() != "queued" || wj.GetWorkflowJob().GetID() != job.ID ||
		wj.GetRepo().GetFullName() != "acme/app" || wj.GetOrg().GetLogin() != "acme" {
		t.Fatalf("parsed event %T %+v", ev, ev)
	}
	// go-github has no enterprise field on WorkflowJobEvent; consumers read it from the JSON.
	var raw struct {
		Enterprise struct{ Slug string } `json:"enterprise"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil || raw.Enterprise.Slug != "megacorp" {
		t.Fatalf("enterprise slug %q (%v), want megacorp", raw.Enterprise.Slug, err)
	}
	if _, err := github.ValidatePayloadFromBody("application/json", bytes.NewReader(h.body), Sign("wrong", h.body), []byte(secret)); err == nil {
		t.Fatal("a payload signed with the wrong secret verified")
	}
}

// A hook's secret can change: later deliveries are signed with the new one, none after it is
// cleared.
func TestSetWebhookSecret(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookWorkers: 1})
	queue := func() receivedHook {
		t.Helper()
		before := len(hr.all())
		if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
			t.Fatal(err)
		}
		waitHooks(t, w.Server)
		return hr.all()[before]
	}
	if h := queue(); h.header.Get("X-Hub-Signature-256") != "" {
		t.Fatalf("unsigned hook sent signature %q", h.header.Get("X-Hub-Signature-256"))
	}
	w.SetWebhookSecret("later")
	if h := queue(); h.header.Get("X-Hub-Signature-256") != Sign("later", h.body) {
		t.Fatalf("signature %q, want one with the new secret", h.header.Get("X-Hub-Signature-256"))
	}
	if !slices.Contains(w.IssuedSecrets(), "later") {
		t.Fatal("the new secret is not among the issued secrets")
	}
	w.SetWebhookSecret("")
	if h := queue(); h.header.Get("X-Hub-Signature-256") != "" {
		t.Fatal("signed after the secret was cleared")
	}
}

func TestUserRepositoryEventHasNoOrganization(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL})
	if _, err := w.QueueJob(JobSpec{Repository: "alice/dotfiles", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	var payload map[string]any
	if err := json.Unmarshal(hr.all()[0].body, &payload); err != nil {
		t.Fatal(err)
	}
	owner := payload["repository"].(map[string]any)["owner"].(map[string]any)
	if _, hasOrg := payload["organization"]; hasOrg || owner["type"] != "User" {
		t.Fatalf("user repository event: organization present=%v owner type %v", hasOrg, owner["type"])
	}
}

func TestFailedDeliveryIsRecordedNotRetried(t *testing.T) {
	hr := newHookReceiver(t)
	hr.answer(http.StatusInternalServerError)
	w := startWorld(t, Config{WebhookURL: hr.URL})
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	ds := w.Deliveries()
	if len(ds) != 1 || !ds[0].Done || ds[0].StatusCode != http.StatusInternalServerError {
		t.Fatalf("deliveries %+v, want one done with status 500", ds)
	}
	if n := len(hr.all()); n != 1 {
		t.Fatalf("receiver saw %d attempts, want 1 (GitHub does not retry)", n)
	}
	// An unreachable receiver is recorded as an error without a status.
	w.SetWebhookURL("http://127.0.0.1:1/unreachable")
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	ds = w.Deliveries()
	if last := ds[len(ds)-1]; !last.Done || last.StatusCode != 0 || last.Error == "" {
		t.Fatalf("delivery to an unreachable receiver: %+v", last)
	}
}

func TestRedeliverKeepsDeliveryID(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookSecret: "x"})
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	id := w.Deliveries()[0].ID
	if err := w.Redeliver(id); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	got := hr.all()
	if len(got) != 2 || got[1].header.Get("X-GitHub-Delivery") != id || !bytes.Equal(got[0].body, got[1].body) {
		t.Fatalf("redelivery: %d deliveries, ids %q/%q", len(got), got[0].header.Get("X-GitHub-Delivery"), got[len(got)-1].header.Get("X-GitHub-Delivery"))
	}
	if ds := w.Deliveries(); !ds[1].Redelivery || ds[1].ID != id {
		t.Fatalf("recorded redelivery %+v", ds[1])
	}
	if err := w.Redeliver("no-such-delivery"); err == nil {
		t.Fatal("redelivering an unknown id succeeded")
	}
}

func TestHoldAndReleaseOutOfOrder(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookWorkers: 1, WebhookSeed: 7})
	w.HoldWebhooks()
	var ids []int64
	for range 6 {
		j, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	waitHooks(t, w.Server)
	if n := len(hr.all()); n != 0 {
		t.Fatalf("%d deliveries left while held", n)
	}
	if n := w.ReleaseWebhooks(ReleaseReversed); n != 6 {
		t.Fatalf("released %d, want 6", n)
	}
	waitHooks(t, w.Server)
	got := receivedJobIDs(t, hr.all())
	slices.Reverse(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("reversed release delivered %v, want %v", got, ids)
	}

	w.HoldWebhooks()
	for range 8 {
		if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
			t.Fatal(err)
		}
	}
	w.ReleaseWebhooks(ReleaseShuffled)
	waitHooks(t, w.Server)
	shuffled := receivedJobIDs(t, hr.all())[6:]
	if slices.IsSorted(shuffled) || len(shuffled) != 8 {
		t.Fatalf("shuffled release delivered %v in order", shuffled)
	}
}

func receivedJobIDs(t *testing.T, hooks []receivedHook) []int64 {
	t.Helper()
	var ids []int64
	for _, h := range hooks {
		var ev github.WorkflowJobEvent
		if err := json.Unmarshal(h.body, &ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.GetWorkflowJob().GetID())
	}
	return ids
}

func TestPing(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL, WebhookSecret: "s"})
	id, err := w.SendPing()
	if err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	got := hr.all()
	if len(got) != 1 || got[0].header.Get("X-GitHub-Event") != "ping" || got[0].header.Get("X-GitHub-Delivery") != id {
		t.Fatalf("ping deliveries %+v", got)
	}
	ev, err := github.ParseWebHook("ping", got[0].body)
	if _, ok := ev.(*github.PingEvent); err != nil || !ok {
		t.Fatalf("ping payload: %T %v", ev, err)
	}
	w.SetWebhookURL("")
	if _, err := w.SendPing(); err == nil {
		t.Fatal("ping without a webhook URL succeeded")
	}
}

func TestNoWebhookURLRecordsNothing(t *testing.T) {
	w := startWorld(t, Config{})
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.WaitForDeliveries(context.Background()); err != nil || len(w.Deliveries()) != 0 {
		t.Fatalf("deliveries without a webhook: %v %v", w.Deliveries(), err)
	}
}
