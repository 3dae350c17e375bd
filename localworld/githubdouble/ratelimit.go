package githubdouble

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// GitHub's rate limits, as "Rate limits for the REST API" documents them: a primary budget of
// requests per credential per hour, and secondary limits on a burst (points a minute and
// concurrent requests, secondary.go). A refused request spends nothing. GitHub answers a
// refusal with 403 or 429; the double answers 403, which every client handles alike (go-github
// tells the two limits apart by X-RateLimit-Remaining: 0 and by the secondary limit's
// documentation_url, not by the status).

// budget is one token's primary rate limit: a fixed window that starts with the first request,
// as GitHub's does.
type budget struct {
	limit int
	used  int
	reset time.Time
}

func (b *budget) spend() { b.used++ }

func (b *budget) remaining() int { return max(b.limit-b.used, 0) }

const (
	anonymousBudget = "anonymous"
	// anonymousLimit is GitHub's budget for unauthenticated requests.
	anonymousLimit = 60
)

// budgetFor returns the current window of a budget, opening a new one when the last expired.
// A window ends on the whole second X-RateLimit-Reset names, so a client that waits until the
// reset it was told finds a fresh window. Callers hold s.mu.
func (s *Server) budgetFor(key string, limit int) *budget {
	now := s.now()
	b, ok := s.st.budgets[key]
	if !ok || !now.Before(b.reset) {
		b = &budget{limit: limit, reset: now.Add(s.cfg.RateWindow).Truncate(time.Second)}
		s.st.budgets[key] = b
	}
	return b
}

// setRateHeaders writes the headers GitHub puts on every API response. Callers hold s.mu.
func (s *Server) setRateHeaders(w http.ResponseWriter, b *budget) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(b.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(b.remaining()))
	h.Set("X-RateLimit-Used", strconv.Itoa(min(b.used, b.limit)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(b.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// refusal says why a request is refused: the primary budget is spent, or a secondary limit
// holds it back for retryAfter.
type refusal struct {
	primary    bool
	retryAfter time.Duration
}

// admit applies the rate limits to one request (method) of the credential named key. It
// answers 403 and returns false when the request is refused; otherwise the request is charged
// and counted in flight until the returned release is called.
func (s *Server) admit(w http.ResponseWriter, key, method string) (release func(), ok bool) {
	s.mu.Lock()
	b := s.budgetFor(key, s.cfg.RateLimit)
	why, refused := s.refuse(key, method, b)
	if !refused {
		b.spend()
		s.chargeSecondary(key, method)
	}
	s.setRateHeaders(w, b)
	s.mu.Unlock()
	switch {
	case !refused:
		return func() { s.releaseSecondary(key) }, true
	case why.primary:
		writeError(w, http.StatusForbidden,
			fmt.Sprintf("API rate limit exceeded for %s.", budgetSubject(key)), docsRateLimit)
	default:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(why.retryAfter)))
		writeError(w, http.StatusForbidden, secondaryMessage, docsSecondary)
	}
	return nil, false
}

// refuse decides whether a request may go on. The manual switch comes first (tests turn it on
// to make every call fail), then the primary budget (an exhausted hour answers with
// X-RateLimit-Remaining: 0, whatever else holds), then the secondary limits. Callers hold s.mu.
func (s *Server) refuse(key, method string, b *budget) (refusal, bool) {
	switch {
	case s.st.secondary > 0:
		return refusal{retryAfter: s.st.secondary}, true
	case b.remaining() == 0:
		return refusal{primary: true}, true
	}
	if wait, over := s.secondaryWait(key, method); over {
		return refusal{retryAfter: wait}, true
	}
	return refusal{}, false
}

// retryAfterSeconds renders a wait as GitHub's Retry-After: whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// budgetSubject names the budget's owner in the error message without echoing the token.
func budgetSubject(key string) string {
	if len(key) > 4 && key[:4] == "app:" {
		return "app ID " + key[4:]
	}
	return "this token"
}

// SetRateLimit changes the primary budget for every credential: limit requests per window (0
// means 5000 an hour, as in Config). Every credential starts a fresh window with its next
// request. Tests of a shared world use it to shrink the budget for a while.
func (s *Server) SetRateLimit(limit int, window time.Duration) {
	if limit <= 0 {
		limit = defaultRateLimit
	}
	if window <= 0 {
		window = time.Hour
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.RateLimit, s.cfg.RateWindow = limit, window
	clear(s.st.budgets)
}
