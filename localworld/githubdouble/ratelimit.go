package githubdouble

import (
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"
)

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
// Callers hold s.mu.
func (s *Server) budgetFor(key string, limit int) *budget {
	now := s.now()
	b, ok := s.st.budgets[key]
	if !ok || !now.Before(b.reset) {
		b = &budget{limit: limit, reset: now.Add(s.cfg.RateWindow)}
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

// admit applies the secondary and primary limits to one request of the budget named key. It
// answers 403 and returns false when the request is refused.
func (s *Server) admit(w http.ResponseWriter, key string) bool {
	s.mu.Lock()
	b := s.budgetFor(key, s.cfg.RateLimit)
	retryAfter := s.st.secondary
	switch {
	case retryAfter > 0:
		s.setRateHeaders(w, b)
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
		writeError(w, http.StatusForbidden,
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", docsSecondary)
		return false
	case b.remaining() == 0:
		s.setRateHeaders(w, b)
		s.mu.Unlock()
		writeError(w, http.StatusForbidden,
			fmt.Sprintf("API rate limit exceeded for %s.", budgetSubject(key)), docsRateLimit)
		return false
	}
	b.spend()
	s.setRateHeaders(w, b)
	s.mu.Unlock()
	return true
}

// budgetSubject names the budget's owner in the error message without echoing the token.
func budgetSubject(key string) string {
	if len(key) > 4 && key[:4] == "app:" {
		return "app ID " + key[4:]
	}
	return "this token"
}

// SetSecondaryRateLimit switches GitHub's secondary ("abuse") rate limit on for every API
// call, answering 403 with the given Retry-After; 0 switches it off.
func (s *Server) SetSecondaryRateLimit(retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.secondary = max(retryAfter, 0)
}

// CallKey identifies counted calls: the route template (e.g. "POST
// /orgs/{org}/actions/runners/generate-jitconfig") and the status answered.
type CallKey struct {
	Route  string
	Status int
}

func (s *Server) count(route string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.calls[CallKey{Route: route, Status: status}]++
}

func (s *Server) countProtocol(route string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.protoCalls[CallKey{Route: route, Status: status}]++
}

// Calls returns how many GitHub API calls each route answered with each status, including
// refused ones (401, rate limited). Runner-protocol calls are not in it.
func (s *Server) Calls() map[CallKey]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.calls)
}

// CallCount sums the API calls of one route template over all statuses.
func (s *Server) CallCount(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.st.calls {
		if k.Route == route {
			n += v
		}
	}
	return n
}

// TotalCalls sums all GitHub API calls.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.st.calls {
		n += v
	}
	return n
}

// RunnerProtocolCalls returns the counts of runner-protocol calls, which GitHub does not
// charge to any API budget.
func (s *Server) RunnerProtocolCalls() map[CallKey]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.protoCalls)
}

// ResetCalls clears both call counters.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.st.calls)
	clear(s.st.protoCalls)
}
