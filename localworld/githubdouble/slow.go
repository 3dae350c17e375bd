package githubdouble

import (
	"bytes"
	"net/http"
	"time"
)

// SetSlowAnswers makes every REST call answer d late (0: at once), as github.com does when a
// backend is struggling: the call is carried out at once — a registration is made, a runner
// removed — and only its answer comes late, so a client that gives up first has done the thing
// without knowing it. Runner-protocol calls and webhook deliveries are not affected.
func (s *Server) SetSlowAnswers(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slow = max(d, 0)
}

func (s *Server) slowAnswers() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slow
}

// answerLate runs h and holds its answer back for d, or until the client has gone.
func answerLate(w http.ResponseWriter, r *http.Request, d time.Duration, h http.HandlerFunc) {
	held := &heldAnswer{header: http.Header{}, status: http.StatusOK}
	h(held, r)
	select {
	case <-time.After(d):
	case <-r.Context().Done():
		return // the client gave up; the call was carried out all the same
	}
	for k, v := range held.header {
		w.Header()[k] = v
	}
	w.WriteHeader(held.status)
	_, _ = w.Write(held.body.Bytes())
}

// heldAnswer keeps an answer until it is sent.
type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *heldAnswer) Header() http.Header         { return a.header }
func (a *heldAnswer) WriteHeader(status int)      { a.status = status }
func (a *heldAnswer) Write(b []byte) (int, error) { return a.body.Write(b) }
