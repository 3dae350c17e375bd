package activities

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// GitHubBudget keeps runnerflow's GitHub calls inside a share of the credential's hourly
// (primary) budget, as GitHub itself reports it on every answer: X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset. While what remains is at or below the reserve
// (the share runnerflow leaves for operators, retries and other tools on the same credential),
// calls are refused locally with a *BudgetReserveError naming the reset, which the classifier
// turns into a RateLimited error whose retry waits for the reset: GitHub work waits, it does not
// fail. The pace of a burst is not kept here but by the GitHub task queue's rate limit
// (workflows.GitHubActivitiesPerSecond), which the Temporal server enforces across replicas.
//
// Every worker replica keeps its own view; the replicas share the credential, so each learns
// the same remaining budget from its own answers.
type GitHubBudget struct {
	// Share is the part of the hourly budget runnerflow may spend; zero means
	// workflows.GitHubBudgetShare.
	Share float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu        sync.Mutex
	known     bool
	limit     int
	remaining int
	reset     time.Time
}

// BudgetReserveError refuses a GitHub call locally: the hour's budget is down to the reserve.
type BudgetReserveError struct {
	Remaining, Reserve int
	Reset              time.Time
}

func (e *BudgetReserveError) Error() string {
	return fmt.Sprintf("GitHub API budget down to its reserve (%d left, %d kept back) until %s",
		e.Remaining, e.Reserve, e.Reset.UTC().Format(time.RFC3339))
}

// Wrap returns a transport that refuses calls while the budget is at its reserve and learns the
// budget from every answer. Put it above the counting transport, so a refused call is not
// counted as a GitHub request (it never reached GitHub).
func (b *GitHubBudget) Wrap(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		// App endpoints (installation tokens) spend the App's own budget, not the
		// installation's, and a token is needed to spend anything after the reset.
		if isAppEndpoint(GitHubEndpoint(r)) {
			return next.RoundTrip(r)
		}
		if err := b.admit(); err != nil {
			return nil, err
		}
		resp, err := next.RoundTrip(r)
		if err == nil {
			b.observe(resp.Header)
		}
		return resp, err
	})
}

// admit refuses a call while the known budget is at or below the reserve and not yet reset.
func (b *GitHubBudget) admit() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.known || !b.now().Before(b.reset) {
		return nil
	}
	if reserve := b.reserve(); b.remaining <= reserve {
		return &BudgetReserveError{Remaining: b.remaining, Reserve: reserve, Reset: b.reset}
	}
	return nil
}

// observe records the budget an answer reports. Answers without the headers (a proxy's error
// page, say) change nothing. The core resource is the one runner endpoints spend.
func (b *GitHubBudget) observe(h http.Header) {
	if res := h.Get("X-RateLimit-Resource"); res != "" && res != "core" {
		return
	}
	limit, errL := strconv.Atoi(h.Get("X-RateLimit-Limit"))
	remaining, errR := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	reset, errT := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if errL != nil || errR != nil || errT != nil || limit <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	at := time.Unix(reset, 0)
	// Answers arrive out of order: within one window keep the lowest remaining seen.
	if b.known && at.Equal(b.reset) && remaining > b.remaining {
		return
	}
	b.known, b.limit, b.remaining, b.reset = true, limit, remaining, at
}

// reserve is the part of the budget left to others. Callers hold b.mu.
func (b *GitHubBudget) reserve() int {
	share := b.Share
	if share <= 0 || share > 1 {
		share = workflows.GitHubBudgetShare
	}
	return b.limit - int(float64(b.limit)*share)
}

func (b *GitHubBudget) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}
