package githubdouble

import (
	"net/http"
	"slices"
)

// Outage makes REST routes answer a server error, as github.com does during an incident: the
// answer comes from GitHub's front end before authentication or rate limiting, so it spends no
// budget and carries no X-RateLimit headers. Runner-protocol calls (the runners' own
// connection) and webhook deliveries are not affected.
type Outage struct {
	// Routes are the route templates to fail, as calls are counted (CallKey.Route, e.g.
	// "GET /orgs/{org}/actions/runners/{runner_id}"); empty fails every REST route.
	Routes []string
	// Status is the answer; zero means 502 Bad Gateway, GitHub's usual answer when a backend
	// is down.
	Status int
}

// StartOutage makes the routes of o answer a server error until EndOutage (a new StartOutage
// replaces the one in force).
func (s *Server) StartOutage(o Outage) {
	if o.Status == 0 {
		o.Status = http.StatusBadGateway
	}
	o.Routes = slices.Clone(o.Routes)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = &o
}

// EndOutage ends the outage in force, if any.
func (s *Server) EndOutage() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = nil
}

// outageStatus is the server error route answers now, or 0 when it answers normally.
func (s *Server) outageStatus(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outage == nil || (len(s.outage.Routes) > 0 && !slices.Contains(s.outage.Routes, route)) {
		return 0
	}
	return s.outage.Status
}

// answerOutage writes GitHub's answer to a call during an outage.
func answerOutage(w http.ResponseWriter, status int) {
	writeError(w, status, "Server Error", "")
}
