package githubdouble

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// CallKey identifies counted calls: the route template (e.g. "POST
// /orgs/{org}/actions/runners/generate-jitconfig") and the status answered.
type CallKey struct {
	Route  string
	Status int
}

// Call is one answered GitHub API call, as CallLog lists it.
type Call struct {
	// Route is the route template, as in CallKey.
	Route string
	// Status is the HTTP status answered.
	Status int
	// At is when the answer was written, on the double's clock.
	At time.Time
	// RateReset is the X-RateLimit-Reset the answer carried: the end of the primary window the
	// call was counted in. Zero when the answer carried none.
	RateReset time.Time
}

// callLogLimit bounds the call log; a long demo drops its oldest entries.
const callLogLimit = 100_000

// count records an answered API call; header is the answer's, for its rate-limit window.
func (s *Server) count(route string, status int, header http.Header) {
	c := Call{Route: route, Status: status}
	if reset, err := strconv.ParseInt(header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		c.RateReset = time.Unix(reset, 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.At = s.now()
	s.st.calls[CallKey{Route: route, Status: status}]++
	if len(s.st.callLog) >= callLogLimit {
		s.st.callLog = slices.Delete(s.st.callLog, 0, callLogLimit/10)
	}
	s.st.callLog = append(s.st.callLog, c)
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

// CallLog returns the GitHub API calls in the order they were answered, with when and in which
// primary window, so a test can tell what happened before and after a reset. It holds the last
// 100 000 calls; runner-protocol calls are not in it.
func (s *Server) CallLog() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.callLog)
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

// ResetCalls clears the call counters (REST, runner protocol, Actions service) and the call log.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.st.calls)
	clear(s.st.protoCalls)
	clear(s.st.serviceCalls)
	s.st.callLog = nil
}
