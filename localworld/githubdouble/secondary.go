package githubdouble

import (
	"net/http"
	"time"
)

// GitHub's secondary rate limits ("About secondary rate limits"): per credential, no more than
// 900 points a minute on REST endpoints (most GET, HEAD and OPTIONS requests cost 1 point, most
// POST, PATCH, PUT and DELETE requests 5) and no more than 100 concurrent requests. GitHub
// words the points limit "to a single endpoint"; the double counts all of a credential's REST
// calls together over a rolling minute, which is stricter, so a client that passes the double
// passes GitHub. GitHub's other secondary limits (CPU time, content creation) are not modelled.

const (
	// DefaultSecondaryPointsPerMinute is GitHub's documented secondary limit on REST calls.
	DefaultSecondaryPointsPerMinute = 900
	// MaxConcurrentRequests is GitHub's documented limit on one credential's requests in flight.
	MaxConcurrentRequests = 100
	// readPoints and writePoints are what a request costs against the points limit.
	readPoints  = 1
	writePoints = 5
	// pointsWindow is the rolling window the points limit counts over.
	pointsWindow = time.Minute
	// concurrencyRetryAfter is the Retry-After of a concurrency refusal: GitHub's advice when it
	// names no time is to wait at least a minute.
	concurrencyRetryAfter = time.Minute
	// secondaryMessage is GitHub's message for every secondary-limit refusal.
	secondaryMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)

// secondaryBudget is one credential's standing against the secondary limits.
type secondaryBudget struct {
	inFlight int
	// charges are the points spent in the last pointsWindow, oldest first; points is their sum.
	charges []charge
	points  int
}

type charge struct {
	at     time.Time
	points int
}

// requestPoints is what a request costs against the points limit.
func requestPoints(method string) int {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return readPoints
	}
	return writePoints
}

// secondaryFor returns a credential's secondary budget with charges older than the window
// dropped. Callers hold s.mu.
func (s *Server) secondaryFor(key string) *secondaryBudget {
	sb, ok := s.st.secondaries[key]
	if !ok {
		sb = &secondaryBudget{}
		s.st.secondaries[key] = sb
	}
	since := s.now().Add(-pointsWindow)
	n := 0
	for n < len(sb.charges) && !sb.charges[n].at.After(since) {
		sb.points -= sb.charges[n].points
		n++
	}
	sb.charges = sb.charges[n:]
	return sb
}

// secondaryWait reports whether a request would exceed a secondary limit and, if so, how long
// until it would not: for the points limit, until enough of the minute's charges have aged
// out. Callers hold s.mu.
func (s *Server) secondaryWait(key, method string) (time.Duration, bool) {
	sb := s.secondaryFor(key)
	if sb.inFlight >= MaxConcurrentRequests {
		return concurrencyRetryAfter, true
	}
	limit, cost := s.cfg.SecondaryPointsPerMinute, requestPoints(method)
	if limit <= 0 || sb.points+cost <= limit {
		return 0, false
	}
	if cost > limit { // a write under a limit below its cost is never admitted
		return pointsWindow, true
	}
	now, left := s.now(), sb.points
	for _, c := range sb.charges {
		left -= c.points
		if left+cost <= limit {
			return c.at.Add(pointsWindow).Sub(now), true
		}
	}
	return pointsWindow, true // not reached: the charges sum to sb.points
}

// chargeSecondary spends a request's points and counts it in flight. Callers hold s.mu.
func (s *Server) chargeSecondary(key, method string) {
	sb := s.secondaryFor(key)
	cost := requestPoints(method)
	sb.charges = append(sb.charges, charge{at: s.now(), points: cost})
	sb.points += cost
	sb.inFlight++
}

// releaseSecondary ends a request's time in flight.
func (s *Server) releaseSecondary(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.st.secondaries[key]; sb != nil && sb.inFlight > 0 {
		sb.inFlight--
	}
}

// SetSecondaryPointsPerMinute changes the points limit for every credential, as
// Config.SecondaryPointsPerMinute (0 means GitHub's 900, negative switches it off). Points
// already spent in the last minute still count.
func (s *Server) SetSecondaryPointsPerMinute(points int) {
	if points == 0 {
		points = DefaultSecondaryPointsPerMinute
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.SecondaryPointsPerMinute = points
}

// SetSecondaryRateLimit switches a secondary ("abuse") rate limit on for every API call of
// every credential, answering 403 with the given Retry-After whatever the points and
// concurrency say; 0 switches it off.
func (s *Server) SetSecondaryRateLimit(retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.secondary = max(retryAfter, 0)
}
