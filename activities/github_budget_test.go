package activities

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// budgetServer answers every request with the rate-limit headers the test sets, and counts the
// requests that reached it.
type budgetServer struct {
	limit, remaining int
	reset            time.Time
	resource         string
	hits             int
}

func (s *budgetServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.hits++
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.reset.Unix(), 10))
	if s.resource != "" {
		h.Set("X-RateLimit-Resource", s.resource)
	}
	w.WriteHeader(http.StatusOK)
}

func TestGitHubBudgetKeepsTheReserveUntilTheReset(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	reset := now.Add(40 * time.Minute)
	srv := &budgetServer{limit: 5000, remaining: 1001, reset: reset}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	budget := &GitHubBudget{Now: func() time.Time { return now }}
	client := &http.Client{Transport: budget.Wrap(nil)}
	get := func(path string) error {
		resp, err := client.Get(ts.URL + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	// Before any answer nothing is known: calls go through. 1001 left is above the reserve
	// (20% of 5000 = 1000), so the next call goes too.
	for i := range 2 {
		if err := get("/orgs/acme/actions/runners"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// GitHub now says 1000 left: at the reserve.
	srv.remaining = 1000
	if err := get("/orgs/acme/actions/runners"); err != nil {
		t.Fatalf("the call that learns the reserve is reached: %v", err)
	}
	hits := srv.hits
	err := get("/orgs/acme/actions/runners/generate-jitconfig")
	var reserve *BudgetReserveError
	if !errors.As(err, &reserve) || !reserve.Reset.Equal(reset) || reserve.Reserve != 1000 {
		t.Fatalf("call at the reserve: %v, want a BudgetReserveError until %s", err, reset)
	}
	if srv.hits != hits {
		t.Errorf("a refused call reached GitHub")
	}
	// Installation tokens spend the App's budget: never refused, never learned from.
	if resp, err := client.Post(ts.URL+"/app/installations/7/access_tokens", "application/json", nil); err != nil {
		t.Errorf("App endpoint refused at the installation's reserve: %v", err)
	} else {
		resp.Body.Close()
	}
	// An answer from another resource (search, graphql) does not move the core budget.
	budget.observe(http.Header{"X-Ratelimit-Resource": {"search"}, "X-Ratelimit-Limit": {"30"},
		"X-Ratelimit-Remaining": {"29"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}})
	// A late answer of the same window with more left does not lift the refusal.
	budget.observe(http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"3000"},
		"X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}})
	if err := budget.admit(); err == nil {
		t.Errorf("the reserve was lifted by a late or foreign answer")
	}
	// At the reset the budget is GitHub's to tell again: calls go through.
	now = reset
	srv.remaining, srv.reset = 4999, reset.Add(time.Hour)
	if err := get("/orgs/acme/actions/runners"); err != nil {
		t.Fatalf("call after the reset: %v", err)
	}
	if err := budget.admit(); err != nil {
		t.Errorf("new window with 4999 left still refused: %v", err)
	}
}
