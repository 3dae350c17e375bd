package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// GitHub's documented test vector for X-Hub-Signature-256.
func TestSignatureTestVector(t *testing.T) {
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	secret, payload := "It's a Secret to Everybody", []byte("Hello, World!")
	if got := githubdouble.Sign(secret, payload); got != want {
		t.Fatalf("the signing helper signs %s, want %s", got, want)
	}
	if err := github.ValidateSignature(want, payload, []byte(secret)); err != nil {
		t.Fatalf("go-github rejects GitHub's test vector: %v", err)
	}
	// And the handler accepts a delivery signed with it.
	h, err := NewHandler(Config{Secret: []byte(secret), Temporal: deadTemporal(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(`{"zen":"Hello, World!"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", "ping")
	r.Header.Set("X-Hub-Signature-256", githubdouble.Sign(secret, []byte(`{"zen":"Hello, World!"}`)))
	if w := serve(h, r); w.Code != http.StatusOK {
		t.Fatalf("ping signed like the test vector: %d %s", w.Code, w.Body)
	}
}

func TestNewHandlerRefusesWithoutSecret(t *testing.T) {
	if _, err := NewHandler(Config{Temporal: deadTemporal(t)}); err == nil {
		t.Fatal("a handler without a webhook secret was created")
	}
	if _, err := NewHandler(Config{Secret: []byte("x")}); err == nil {
		t.Fatal("a handler without a Temporal client was created")
	}
}

// badInputHandler has no reachable Temporal: none of these requests may need it.
func badInputHandler(t *testing.T) (*Handler, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	h, err := NewHandler(Config{Secret: []byte(testSecret), Temporal: deadTemporal(t), Metrics: m, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return h, m
}

func TestBadSignatures(t *testing.T) {
	h, m := badInputHandler(t)
	body := []byte(`{"zen":"x","hook_id":1}`)
	sha1Only := func(r *http.Request) {
		r.Header.Del("X-Hub-Signature-256")
		r.Header.Set("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000")
	}
	for name, mutate := range map[string]func(*http.Request){
		"missing":      func(r *http.Request) { r.Header.Del("X-Hub-Signature-256") },
		"other secret": func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", githubdouble.Sign("not the secret", body)) },
		"other body": func(r *http.Request) {
			r.Header.Set("X-Hub-Signature-256", githubdouble.Sign(testSecret, []byte("{}")))
		},
		"not hex": func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=zz") },
		"no prefix": func(r *http.Request) {
			r.Header.Set("X-Hub-Signature-256", githubdouble.Sign(testSecret, body)[len("sha256="):])
		},
		"empty value":      func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=") },
		"sha1 header only": sha1Only,
	} {
		t.Run(name, func(t *testing.T) {
			r := delivery("ping", "d-"+name, body)
			mutate(r)
			if w := serve(h, r); w.Code != http.StatusUnauthorized {
				t.Errorf("got %d %s, want 401", w.Code, w.Body)
			}
		})
	}
	if got := testutil.ToFloat64(m.Events("ping", OutcomeBadSignature)); got != 7 {
		t.Errorf("counted %v bad signatures, want 7", got)
	}
}

// TestMalformedBodies is a fuzz-ish table: correctly signed bodies that are not what GitHub
// sends. Each gets a clear 4xx and none panics (a panic fails the test through httptest).
func TestMalformedBodies(t *testing.T) {
	h, _ := badInputHandler(t)
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	for _, tc := range []struct {
		event, body string
	}{
		{"workflow_job", ``}, {"workflow_job", `{`}, {"workflow_job", `not json`}, {"workflow_job", "\xff\xfe"},
		{"workflow_job", `null`}, {"workflow_job", `[]`}, {"workflow_job", `"queued"`}, {"workflow_job", `{}`},
		{"workflow_job", `{"action":"queued"}`},
		{"workflow_job", `{"action":"queued","workflow_job":null,"repository":{"full_name":"a/b"}}`},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":"12"},"repository":{"full_name":"a/b"}}`},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":1e999},"repository":{"full_name":"a/b"}}`},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":-4},"repository":{"full_name":"a/b"}}`},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":4,"labels":"linux"},"repository":{"full_name":"a/b"}}`},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":4},"repository":{}}`},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":4},"repository":{"full_name":"a/b"},"enterprise":"big"}`},
		{"workflow_job", `{"action":["queued"],"workflow_job":{"id":4},"repository":{"full_name":"a/b"}}`},
		{"workflow_job", deep},
		{"ping", `{"hook_id":"one"}`}, {"ping", `{`},
		{"push", `{"ref":`},
	} {
		r := delivery(tc.event, "d-malformed", []byte(tc.body))
		w := serve(h, r)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s %.60q: got %d %s, want 400", tc.event, tc.body, w.Code, w.Body)
		}
	}
}

func TestBodyOverGitHubsLimit(t *testing.T) {
	h, m := badInputHandler(t)
	body := bytes.Repeat([]byte(" "), workflows.WebhookMaxBodyBytes+1)
	if w := serve(h, delivery("workflow_job", "d-big", body)); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %d, want 413", w.Code)
	}
	if got := testutil.ToFloat64(m.Events("workflow_job", OutcomeTooLarge)); got != 1 {
		t.Errorf("counted %v oversized deliveries, want 1", got)
	}
	// Exactly at the limit is not too large (it is then just malformed JSON padding).
	body = append([]byte(`{"zen":"x"}`), bytes.Repeat([]byte(" "), workflows.WebhookMaxBodyBytes-11)...)
	if w := serve(h, delivery("ping", "d-limit", body)); w.Code != http.StatusOK {
		t.Fatalf("a ping of exactly 25 MB: got %d %s, want 200", w.Code, w.Body)
	}
}

func TestContentTypes(t *testing.T) {
	h, _ := badInputHandler(t)
	ping := `{"zen":"x","hook_id":1}`
	form := []byte("payload=" + url.QueryEscape(ping))
	r := delivery("ping", "d-form", form)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if w := serve(h, r); w.Code != http.StatusOK {
		t.Errorf("form-encoded ping: got %d %s, want 200", w.Code, w.Body)
	}
	r = delivery("ping", "d-text", []byte(ping))
	r.Header.Set("Content-Type", "text/plain")
	if w := serve(h, r); w.Code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: got %d, want 415", w.Code)
	}
	r = delivery("ping", "d-charset", []byte(ping))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	if w := serve(h, r); w.Code != http.StatusOK {
		t.Errorf("json with charset: got %d %s, want 200", w.Code, w.Body)
	}
}

func TestOtherEventsAndActionsAreIgnored(t *testing.T) {
	h, m := badInputHandler(t)
	for _, event := range []string{"push", "workflow_run", "check_run", ""} {
		if w := serve(h, delivery(event, "d-"+event, []byte(`{"action":"completed"}`))); w.Code != http.StatusOK {
			t.Errorf("%q event: got %d, want 200", event, w.Code)
		}
	}
	if got := testutil.ToFloat64(m.Events("other", OutcomeIgnored)); got != 4 {
		t.Errorf("counted %v ignored events, want 4", got)
	}
	// A waiting job and a job in progress on no named runner need no Temporal at all.
	for _, body := range []string{
		`{"action":"waiting","workflow_job":{"id":5,"labels":["self-hosted"]},"repository":{"full_name":"a/b","owner":{"login":"a"}}}`,
		`{"action":"in_progress","workflow_job":{"id":5},"repository":{"full_name":"a/b","owner":{"login":"a"}}}`,
	} {
		if w := serve(h, delivery("workflow_job", "d-ignored", []byte(body))); w.Code != http.StatusOK {
			t.Errorf("%s: got %d %s, want 200", body, w.Code, w.Body)
		}
	}
	if got := testutil.ToFloat64(m.Events("workflow_job", OutcomeIgnored)); got != 2 {
		t.Errorf("counted %v ignored workflow_job events, want 2", got)
	}
	// A job in progress on a runner runnerflow does not run may end a pool's reservation, so
	// it is routed; with Temporal unreachable GitHub's delivery log must show the failure.
	body := `{"action":"in_progress","workflow_job":{"id":5,"runner_name":"GitHub Actions 2"},"repository":{"full_name":"a/b","owner":{"login":"a"}}}`
	if w := serve(h, delivery("workflow_job", "d-foreign", []byte(body))); w.Code != http.StatusServiceUnavailable {
		t.Errorf("in_progress on a foreign runner with Temporal down: got %d %s, want 503", w.Code, w.Body)
	}
}

// TestTemporalUnreachable: a delivery that needs Temporal while it is down gets 503, so the
// failure shows in GitHub's delivery log; readiness says not ready; liveness stays up.
func TestTemporalUnreachable(t *testing.T) {
	h, m := badInputHandler(t)
	queued := `{"action":"queued","workflow_job":{"id":7,"labels":["self-hosted","linux"]},"repository":{"full_name":"acme/app","owner":{"login":"acme","type":"Organization"}}}`
	started := `{"action":"in_progress","workflow_job":{"id":7,"runner_name":"linux-abcd-1"},"repository":{"full_name":"acme/app","owner":{"login":"acme","type":"Organization"}}}`
	for _, body := range []string{queued, started} {
		if w := serve(h, delivery("workflow_job", "d-down", []byte(body))); w.Code != http.StatusServiceUnavailable {
			t.Errorf("got %d %s, want 503", w.Code, w.Body)
		}
	}
	if got := testutil.ToFloat64(m.Events("workflow_job", OutcomeUnavailable)); got != 2 {
		t.Errorf("counted %v unavailable, want 2", got)
	}
	if w := serve(h, httptest.NewRequest(http.MethodGet, "/readyz", nil)); w.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Temporal down: %d, want 503", w.Code)
	}
	if w := serve(h, httptest.NewRequest(http.MethodGet, "/healthz", nil)); w.Code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", w.Code)
	}
	if w := serve(newHandler(t), httptest.NewRequest(http.MethodGet, "/readyz", nil)); w.Code != http.StatusOK {
		t.Errorf("/readyz with Temporal up: %d, want 200", w.Code)
	}
}
