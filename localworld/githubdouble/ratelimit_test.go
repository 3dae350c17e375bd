package githubdouble

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

func TestRateLimitHeadersOnEveryResponse(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{RateLimit: 10, Now: clock.Now})
	c := w.client(testToken, nil)
	ctx := context.Background()
	_, resp, err := c.Actions.ListOrganizationRunners(ctx, "acme", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Rate.Limit != 10 || resp.Rate.Remaining != 9 || resp.Rate.Used != 1 {
		t.Fatalf("rate %+v, want limit 10 remaining 9 used 1", resp.Rate)
	}
	if want := clock.Now().Add(time.Hour).Unix(); resp.Rate.Reset.Unix() != want {
		t.Fatalf("reset %v, want %v", resp.Rate.Reset.Unix(), want)
	}
	if got := resp.Header.Get("X-RateLimit-Resource"); got != "core" {
		t.Fatalf("X-RateLimit-Resource %q, want core", got)
	}
	// Error answers carry the headers too.
	_, resp, err = c.Actions.GetOrganizationRunner(ctx, "acme", 12345)
	if statusOf(err) != http.StatusNotFound || resp.Header.Get("X-RateLimit-Remaining") != "8" {
		t.Fatalf("404 answer: %v, remaining %q", err, resp.Header.Get("X-RateLimit-Remaining"))
	}
}

func TestPrimaryRateLimitIsRateLimitErrorUntilReset(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{RateLimit: 3, Now: clock.Now})
	ctx := context.Background()
	c := w.client(testToken, nil)
	for i := range 3 {
		if _, _, err := c.Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
			t.Fatalf("call %d within budget: %v", i, err)
		}
	}
	// A fresh client, so go-github's own memory of the limit does not answer for the double.
	_, resp, err := w.client(testToken, nil).Actions.ListOrganizationRunners(ctx, "acme", nil)
	var rle *github.RateLimitError
	if !errors.As(err, &rle) {
		t.Fatalf("call over budget: %T %v, want *github.RateLimitError", err, err)
	}
	if resp.StatusCode != http.StatusForbidden || rle.Rate.Remaining != 0 || rle.Rate.Reset.Unix() != clock.Now().Add(time.Hour).Unix() {
		t.Fatalf("status %d rate %+v", resp.StatusCode, rle.Rate)
	}
	// The window ends at reset.
	clock.Advance(time.Hour)
	if _, _, err := w.client(testToken, nil).Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
		t.Fatalf("call after the window reset: %v", err)
	}
	if n := w.Calls()[CallKey{Route: "GET /orgs/{org}/actions/runners", Status: http.StatusForbidden}]; n != 1 {
		t.Fatalf("counted %d refused calls, want 1", n)
	}
}

func TestBudgetsArePerToken(t *testing.T) {
	w := startWorld(t, Config{RateLimit: 1, Tokens: []string{"tok-a", "tok-b"}})
	ctx := context.Background()
	if _, _, err := w.client("tok-a", nil).Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
		t.Fatal(err)
	}
	_, resp, err := w.client("tok-b", nil).Actions.ListOrganizationRunners(ctx, "acme", nil)
	if err != nil || resp.Rate.Remaining != 0 || resp.Rate.Used != 1 {
		t.Fatalf("second token: %v, rate %+v; want its own budget", err, resp.Rate)
	}
}

func TestSecondaryRateLimitIsAbuseRateLimitError(t *testing.T) {
	w := startWorld(t, Config{})
	ctx := context.Background()
	w.SetSecondaryRateLimit(90 * time.Second)
	_, _, err := w.client(testToken, nil).Actions.ListOrganizationRunners(ctx, "acme", nil)
	var are *github.AbuseRateLimitError
	if !errors.As(err, &are) {
		t.Fatalf("secondary limit: %T %v, want *github.AbuseRateLimitError", err, err)
	}
	if are.RetryAfter == nil || *are.RetryAfter != 90*time.Second {
		t.Fatalf("RetryAfter %v, want 90s", are.RetryAfter)
	}
	w.SetSecondaryRateLimit(0)
	if _, _, err := w.client(testToken, nil).Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
		t.Fatalf("after switching the secondary limit off: %v", err)
	}
}

func TestUnknownTokenIs401(t *testing.T) {
	w := startWorld(t, Config{})
	ctx := context.Background()
	_, resp, err := w.client("ghp_wrong", nil).Actions.ListOrganizationRunners(ctx, "acme", nil)
	if statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("unknown token: %v, want 401", err)
	}
	if _, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Limit")); err != nil {
		t.Fatalf("401 without rate-limit headers: %v", resp.Header)
	}
	if _, _, err := w.client("", nil).Actions.ListOrganizationRunners(ctx, "acme", nil); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("no token: %v, want 401", err)
	}
	if n := w.Calls()[CallKey{Route: "GET /orgs/{org}/actions/runners", Status: http.StatusUnauthorized}]; n != 2 {
		t.Fatalf("counted %d 401 answers, want 2", n)
	}
	w.ResetCalls()
	if len(w.Calls()) != 0 {
		t.Fatal("ResetCalls left counts behind")
	}
}

// The hour spent: 403 with X-RateLimit-Remaining 0, the window's reset and every rate header,
// no Retry-After (that is the secondary limit's), whatever the points say; the next window
// admits again.
func TestPrimaryExhaustionAnswer(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{RateLimit: 2, RateWindow: time.Minute, SecondaryPointsPerMinute: 6, Now: clock.Now})
	reset := strconv.FormatInt(clock.Now().Add(time.Minute).Unix(), 10)
	w.send(http.MethodDelete, pathUnknownRunner, testToken, nil)
	w.send(http.MethodGet, pathListRunners, testToken, nil)
	// Over both limits now (7 points > 6): the primary limit answers.
	a := w.send(http.MethodDelete, pathUnknownRunner, testToken, nil)
	want := map[string]string{
		"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "2",
		"X-RateLimit-Reset": reset, "X-RateLimit-Resource": "core",
	}
	for h, v := range want {
		if got := a.header.Get(h); got != v {
			t.Errorf("%s: %q, want %q", h, got, v)
		}
	}
	if a.status != http.StatusForbidden || a.retryAfter() != -1 || !strings.Contains(a.body, "API rate limit exceeded") {
		t.Fatalf("exhausted: %d Retry-After %d %s, want GitHub's primary 403", a.status, a.retryAfter(), a.body)
	}
	clock.Advance(time.Minute)
	a = w.send(http.MethodGet, pathListRunners, testToken, nil)
	if a.status != http.StatusOK || a.header.Get("X-RateLimit-Used") != "1" || a.header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("next window: %d used %s", a.status, a.header.Get("X-RateLimit-Used"))
	}
}

// SetRateLimit shrinks the budget of a running double and opens fresh windows; the call log
// tells which window each call was counted in.
func TestSetRateLimitAndCallLog(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{Now: clock.Now})
	w.send(http.MethodGet, pathListRunners, testToken, nil)
	w.ResetCalls()
	w.SetRateLimit(1, 10*time.Second)
	start := clock.Now()
	ok := w.send(http.MethodGet, pathListRunners, testToken, nil)
	refused := w.send(http.MethodGet, pathListRunners, testToken, nil)
	if ok.status != http.StatusOK || ok.header.Get("X-RateLimit-Limit") != "1" || refused.status != http.StatusForbidden {
		t.Fatalf("after SetRateLimit(1, 10s): %d (limit %s), then %d", ok.status, ok.header.Get("X-RateLimit-Limit"), refused.status)
	}
	clock.Advance(10 * time.Second)
	w.send(http.MethodGet, pathListRunners, testToken, nil)
	log := w.CallLog()
	if len(log) != 3 {
		t.Fatalf("call log %+v, want 3 calls", log)
	}
	first, second := start.Add(10*time.Second), start.Add(20*time.Second)
	for i, want := range []Call{
		{Route: "GET /orgs/{org}/actions/runners", Status: 200, At: start, RateReset: first},
		{Route: "GET /orgs/{org}/actions/runners", Status: 403, At: start, RateReset: first},
		{Route: "GET /orgs/{org}/actions/runners", Status: 200, At: first, RateReset: second},
	} {
		if got := log[i]; got.Route != want.Route || got.Status != want.Status || !got.At.Equal(want.At) || !got.RateReset.Equal(want.RateReset) {
			t.Errorf("call %d: %+v, want %+v", i, got, want)
		}
	}
	w.ResetCalls()
	if len(w.CallLog()) != 0 {
		t.Fatal("ResetCalls left the call log")
	}
}

// X-RateLimit-Reset has whole seconds; the window ends on that second, not a fraction later,
// so a client that waits until the reset it was told is admitted.
func TestWindowEndsAtTheReportedReset(t *testing.T) {
	clock := newFakeClock()
	clock.Advance(500 * time.Millisecond)
	w := startWorld(t, Config{RateLimit: 1, RateWindow: 10 * time.Second, Now: clock.Now})
	w.send(http.MethodGet, pathListRunners, testToken, nil)
	refused := w.send(http.MethodGet, pathListRunners, testToken, nil)
	reset, _ := strconv.ParseInt(refused.header.Get("X-RateLimit-Reset"), 10, 64)
	clock.Advance(time.Unix(reset, 0).Sub(clock.Now()))
	if a := w.send(http.MethodGet, pathListRunners, testToken, nil); a.status != http.StatusOK {
		t.Fatalf("at the reported reset: %d %s, want a fresh window", a.status, a.body)
	}
}
