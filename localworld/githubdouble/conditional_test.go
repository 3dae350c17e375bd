package githubdouble

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-github/v92/github"
)

// conditionalGet makes a GET with the real go-github client, with If-None-Match when etag is
// set, and returns the answer's status, ETag and X-RateLimit-Remaining.
func conditionalGet(t *testing.T, c *github.Client, path, etag string) (status int, newETag string, remaining int) {
	t.Helper()
	req, err := c.NewRequest(context.Background(), http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.Do(req, &map[string]any{})
	if resp == nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	remaining, _ = strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
	return resp.StatusCode, resp.Header.Get("ETag"), remaining
}

// driveConditional exercises the listings' conditional requests: an answer's ETag sent back
// gets 304 while nothing changed, and a new answer once a job changed.
func driveConditional(t *testing.T, w *world, c *github.Client) {
	j, err := w.QueueJob(JobSpec{Repository: "acme/lib", Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"repos/acme/lib/actions/runs?status=queued", "repos/acme/lib/actions/runs/" + strconv.FormatInt(j.RunID, 10) + "/jobs"} {
		status, etag, _ := conditionalGet(t, c, path, "")
		if status != http.StatusOK || etag == "" {
			t.Fatalf("GET %s: %d with ETag %q, want 200 with one", path, status, etag)
		}
		if status, again, _ := conditionalGet(t, c, path, etag); status != http.StatusNotModified || again != etag {
			t.Fatalf("GET %s with its ETag: %d, ETag %q; want 304 with the same ETag", path, status, again)
		}
	}
	if err := w.CancelJob(j.ID); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := conditionalGet(t, c, "repos/acme/lib/actions/runs?status=queued", `W/"stale"`); status != http.StatusOK {
		t.Fatalf("GET with a stale ETag: %d, want 200", status)
	}
}

// TestNotModifiedCostsNoBudget: a 304 leaves X-RateLimit-Remaining where it was, as GitHub's
// conditional requests do; a 200 costs one request.
func TestNotModifiedCostsNoBudget(t *testing.T) {
	w := startWorld(t, Config{RateLimit: 100})
	c := w.client(testToken, nil)
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	const path = "repos/acme/app/actions/runs?status=queued"
	_, etag, before := conditionalGet(t, c, path, "")
	for range 5 {
		status, _, remaining := conditionalGet(t, c, path, etag)
		if status != http.StatusNotModified || remaining != before {
			t.Fatalf("conditional GET: %d with %d remaining, want 304 with %d remaining", status, remaining, before)
		}
	}
	if status, _, remaining := conditionalGet(t, c, path, ""); status != http.StatusOK || remaining != before-1 {
		t.Fatalf("unconditional GET: %d with %d remaining, want 200 with %d", status, remaining, before-1)
	}
	if n := w.Calls()[CallKey{Route: "GET /repos/{owner}/{repo}/actions/runs", Status: http.StatusNotModified}]; n != 5 {
		t.Fatalf("counted %d answers 304, want 5 (a 304 is a call, counted, though not charged)", n)
	}
}

// TestDropWebhooksFailsAShare: dropped deliveries are recorded as failed and never sent.
func TestDropWebhooksFailsAShare(t *testing.T) {
	hr := newHookReceiver(t)
	w := startWorld(t, Config{WebhookURL: hr.URL})
	w.DropWebhooks(0.5)
	const jobs = 40
	for range jobs {
		if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitHooks(t, w.Server)
	dropped := 0
	for _, d := range w.Deliveries() {
		if d.Error == errDropped {
			dropped++
		}
	}
	if dropped == 0 || dropped == jobs || len(hr.all()) != jobs-dropped {
		t.Fatalf("%d of %d deliveries dropped, receiver saw %d; want some dropped, the rest received", dropped, jobs, len(hr.all()))
	}
	w.DropWebhooks(0)
	if _, err := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	waitHooks(t, w.Server)
	if len(hr.all()) != jobs-dropped+1 {
		t.Fatalf("after DropWebhooks(0) the receiver saw %d, want %d", len(hr.all()), jobs-dropped+1)
	}
}
