package githubdouble

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

const (
	pathListRunners = "orgs/acme/actions/runners"
	// pathUnknownRunner is a DELETE that costs a write and changes nothing (404).
	pathUnknownRunner = "orgs/acme/actions/runners/424242"
)

// answer is what the double said to one raw request.
type answer struct {
	status int
	header http.Header
	body   string
}

// retryAfter is the answer's Retry-After in seconds, or -1 without one.
func (a answer) retryAfter() int {
	v := a.header.Get("Retry-After")
	if v == "" {
		return -1
	}
	n, _ := strconv.Atoi(v)
	return n
}

// send makes one raw API request, so the method is explicit and no client remembers a refusal.
func (w *world) send(method, path, token string, body io.Reader) answer {
	w.t.Helper()
	req, err := http.NewRequest(method, w.URL()+path, body)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func isSecondaryRefusal(a answer) bool {
	return a.status == http.StatusForbidden && strings.Contains(a.body, "secondary rate limit") &&
		strings.Contains(a.body, "#about-secondary-rate-limits") && a.header.Get("X-RateLimit-Remaining") != "0"
}

func TestRequestPointsByMethod(t *testing.T) {
	for method, want := range map[string]int{
		http.MethodGet: 1, http.MethodHead: 1, http.MethodOptions: 1,
		http.MethodPost: 5, http.MethodPatch: 5, http.MethodPut: 5, http.MethodDelete: 5,
	} {
		if got := requestPoints(method); got != want {
			t.Errorf("%s costs %d points, want %d", method, got, want)
		}
	}
}

// A rolling minute of 12 points: writes cost 5, reads 1; a request over the limit is refused
// with the seconds until enough points age out, spends nothing, and goes through once they have.
func TestSecondaryPointsPerRollingMinute(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{SecondaryPointsPerMinute: 12, Now: clock.Now})
	steps := []struct {
		advance    time.Duration
		method     string
		path       string
		refused    bool
		retryAfter int
	}{
		{0, http.MethodDelete, pathUnknownRunner, false, 0},                // 5 points
		{10 * time.Second, http.MethodDelete, pathUnknownRunner, false, 0}, // 10
		{10 * time.Second, http.MethodGet, pathListRunners, false, 0},      // 11
		{0, http.MethodGet, pathListRunners, false, 0},                     // 12
		{10 * time.Second, http.MethodGet, pathListRunners, true, 30},      // 13: the first write frees 5 at 60 s
		{0, http.MethodPost, "orgs/acme/actions/runners/registration-token", true, 30},
		{30 * time.Second, http.MethodGet, pathListRunners, false, 0},                  // the first write aged out: 8
		{0, http.MethodDelete, pathUnknownRunner, true, 10},                            // 13: the second write frees 5 at 70 s
		{10 * time.Second, http.MethodDelete, pathUnknownRunner, false, 0},             // 8
		{0, http.MethodPost, "orgs/acme/actions/runners/registration-token", true, 10}, // 13: a read of 20 s frees 1 at 80 s
	}
	used := 0
	for i, st := range steps {
		clock.Advance(st.advance)
		a := w.send(st.method, st.path, testToken, nil)
		if st.refused {
			if !isSecondaryRefusal(a) || a.retryAfter() != st.retryAfter {
				t.Fatalf("step %d %s %s: %d Retry-After %q %s; want a secondary refusal with Retry-After %d",
					i, st.method, st.path, a.status, a.header.Get("Retry-After"), a.body, st.retryAfter)
			}
		} else {
			if isSecondaryRefusal(a) || a.retryAfter() != -1 {
				t.Fatalf("step %d %s %s: refused (%d %s), want admitted", i, st.method, st.path, a.status, a.body)
			}
			used++
		}
		// A refused request spends no primary budget.
		if got := a.header.Get("X-RateLimit-Used"); got != strconv.Itoa(used) {
			t.Fatalf("step %d: X-RateLimit-Used %s, want %d", i, got, used)
		}
	}
}

func TestSecondaryPointsRefusalIsAbuseRateLimitError(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{SecondaryPointsPerMinute: 2, Now: clock.Now})
	ctx := context.Background()
	for range 2 {
		if _, _, err := w.client(testToken, nil).Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(15 * time.Second)
	_, resp, err := w.client(testToken, nil).Actions.ListOrganizationRunners(ctx, "acme", nil)
	var are *github.AbuseRateLimitError
	if !errors.As(err, &are) || are.RetryAfter == nil || *are.RetryAfter != 45*time.Second {
		t.Fatalf("over the points limit: %T %v, want *github.AbuseRateLimitError with RetryAfter 45s", err, err)
	}
	if resp.Rate.Remaining != 4998 || resp.Rate.Limit != 5000 {
		t.Fatalf("refusal reports rate %+v, want the primary budget untouched (4998 of 5000 left)", resp.Rate)
	}
}

// GitHub's default of 900 points: 180 writes in a minute pass, the next write or read does not;
// a negative setting switches the points limit off.
func TestSecondaryPointsDefaultAndOff(t *testing.T) {
	clock := newFakeClock()
	w := startWorld(t, Config{Now: clock.Now})
	for i := range 180 {
		if a := w.send(http.MethodDelete, pathUnknownRunner, testToken, nil); a.status != http.StatusNotFound {
			t.Fatalf("write %d of 180: %d %s, want 404", i+1, a.status, a.body)
		}
	}
	for _, method := range []string{http.MethodDelete, http.MethodGet} {
		if a := w.send(method, pathUnknownRunner, testToken, nil); !isSecondaryRefusal(a) || a.retryAfter() != 60 {
			t.Fatalf("%s after 900 points: %d Retry-After %d %s, want a secondary refusal for 60 s", method, a.status, a.retryAfter(), a.body)
		}
	}
	clock.Advance(time.Minute)
	if a := w.send(http.MethodDelete, pathUnknownRunner, testToken, nil); a.status != http.StatusNotFound {
		t.Fatalf("a minute later: %d %s, want the write admitted", a.status, a.body)
	}

	off := startWorld(t, Config{SecondaryPointsPerMinute: -1, Now: clock.Now})
	for i := range 200 {
		if a := off.send(http.MethodDelete, pathUnknownRunner, testToken, nil); a.status != http.StatusNotFound {
			t.Fatalf("points limit off, write %d: %d %s", i+1, a.status, a.body)
		}
	}
	off.SetSecondaryPointsPerMinute(1000)
	if a := off.send(http.MethodDelete, pathUnknownRunner, testToken, nil); !isSecondaryRefusal(a) {
		t.Fatalf("after SetSecondaryPointsPerMinute(1000) with 1000 points spent: %d %s, want refused", a.status, a.body)
	}
}

// Points are per credential, like the primary budget.
func TestSecondaryPointsArePerCredential(t *testing.T) {
	w := startWorld(t, Config{SecondaryPointsPerMinute: 5, Tokens: []string{"tok-a", "tok-b"}})
	if a := w.send(http.MethodDelete, pathUnknownRunner, "tok-a", nil); a.status != http.StatusNotFound {
		t.Fatalf("tok-a's write: %d", a.status)
	}
	if a := w.send(http.MethodGet, pathListRunners, "tok-a", nil); !isSecondaryRefusal(a) {
		t.Fatalf("tok-a over its points: %d %s", a.status, a.body)
	}
	if a := w.send(http.MethodDelete, pathUnknownRunner, "tok-b", nil); a.status != http.StatusNotFound {
		t.Fatalf("tok-b's own points: %d %s", a.status, a.body)
	}
}

// inFlight is how many requests of a credential the double counts in flight.
func (w *world) inFlight(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sb := w.st.secondaries[key]; sb != nil {
		return sb.inFlight
	}
	return 0
}

// TestConcurrencyLimit holds 100 requests of one credential in flight (their bodies still
// uploading): the 101st is a secondary refusal, another credential is not affected, and once
// they finish the credential is admitted again.
func TestConcurrencyLimit(t *testing.T) {
	w := startWorld(t, Config{Tokens: []string{testToken, "tok-other"}})
	var wg sync.WaitGroup
	uploads := make([]*io.PipeWriter, MaxConcurrentRequests)
	statuses := make([]int, MaxConcurrentRequests)
	for i := range uploads {
		r, pw := io.Pipe()
		uploads[i] = pw
		wg.Go(func() {
			statuses[i] = w.send(http.MethodPost, "orgs/acme/actions/runners/generate-jitconfig", testToken, r).status
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for w.inFlight(testToken) < MaxConcurrentRequests {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests in flight", w.inFlight(testToken))
		}
		time.Sleep(10 * time.Millisecond)
	}
	a := w.send(http.MethodGet, pathListRunners, testToken, nil)
	if !isSecondaryRefusal(a) || a.retryAfter() != 60 {
		t.Fatalf("request 101: %d Retry-After %d %s, want a secondary refusal for 60 s", a.status, a.retryAfter(), a.body)
	}
	_, _, err := w.client(testToken, nil).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
	if are := (*github.AbuseRateLimitError)(nil); !errors.As(err, &are) {
		t.Fatalf("request 102 through go-github: %T %v, want *github.AbuseRateLimitError", err, err)
	}
	if a := w.send(http.MethodGet, pathListRunners, "tok-other", nil); a.status != http.StatusOK {
		t.Fatalf("another credential meanwhile: %d %s", a.status, a.body)
	}
	for i, pw := range uploads {
		_, _ = io.WriteString(pw, `{"name":"held-`+strconv.Itoa(i)+`","runner_group_id":1,"labels":["linux"]}`)
		_ = pw.Close()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusCreated {
			t.Fatalf("held request %d answered %d, want 201", i, st)
		}
	}
	if n := w.inFlight(testToken); n != 0 {
		t.Fatalf("%d requests still counted in flight", n)
	}
	if a := w.send(http.MethodGet, pathListRunners, testToken, nil); a.status != http.StatusOK {
		t.Fatalf("after the held requests finished: %d %s", a.status, a.body)
	}
}

// The manual switch refuses every call, spends nothing, and leaves the points alone.
func TestManualSecondaryLimitSpendsNothing(t *testing.T) {
	w := startWorld(t, Config{SecondaryPointsPerMinute: 5})
	w.SetSecondaryRateLimit(7 * time.Second)
	for range 3 {
		if a := w.send(http.MethodDelete, pathUnknownRunner, testToken, nil); !isSecondaryRefusal(a) || a.retryAfter() != 7 {
			t.Fatalf("switched on: %d Retry-After %d %s", a.status, a.retryAfter(), a.body)
		}
	}
	w.SetSecondaryRateLimit(0)
	a := w.send(http.MethodDelete, pathUnknownRunner, testToken, nil)
	if a.status != http.StatusNotFound || a.header.Get("X-RateLimit-Used") != "1" {
		t.Fatalf("switched off: %d used %s, want the write admitted as the first charged call", a.status, a.header.Get("X-RateLimit-Used"))
	}
}

// Runner-protocol calls are the runner's own connection, not REST API calls: no budget, no
// points, no limit applies to them.
func TestRunnerProtocolIsNotCharged(t *testing.T) {
	w := startWorld(t, Config{RateLimit: 2, SecondaryPointsPerMinute: 6})
	ctx := context.Background()
	cfg, err := w.jit(ctx, w.client(testToken, nil), "acme", "proto", "linux")
	if err != nil {
		t.Fatal(err)
	}
	w.SetSecondaryRateLimit(time.Minute)
	sess := connectJIT(t, w.Server, cfg)
	job, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if got := acquireNow(t, w.Server, sess); got == nil || got.ID != job.ID {
		t.Fatalf("runner got %+v, want job %d", got, job.ID)
	}
	if err := NewRunnerClient(w.URL()).CompleteJob(ctx, sess, job.ID, ConclusionSuccess); err != nil {
		t.Fatalf("completing the job under the secondary limit: %v", err)
	}
	w.SetSecondaryRateLimit(0)
	// The JIT call spent 5 points and 1 request; the protocol calls spent nothing.
	a := w.send(http.MethodGet, pathListRunners, testToken, nil)
	if a.status != http.StatusOK || a.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("the budget's second request: %d remaining %s, want 200 with 0 left", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	if n := w.TotalCalls(); n != 2 {
		t.Fatalf("counted %d API calls, want 2 (the protocol calls are apart)", n)
	}
	if len(w.RunnerProtocolCalls()) == 0 {
		t.Fatal("no runner-protocol calls counted")
	}
}
