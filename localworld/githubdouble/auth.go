package githubdouble

import (
	"net/http"
	"strings"
	"time"
)

type tokenKind int

const (
	tokenPersonal tokenKind = iota
	tokenInstallation
)

// apiToken is a credential the REST API accepts.
type apiToken struct {
	kind    tokenKind
	expires time.Time // zero for personal tokens, which do not expire here
}

// bearer extracts the credential from "Authorization: token X" or "Authorization: Bearer X".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || (!strings.EqualFold(scheme, "token") && !strings.EqualFold(scheme, "bearer")) {
		return ""
	}
	return strings.TrimSpace(cred)
}

// restCredential extracts a REST API credential: a token or bearer credential, or a personal
// token sent as the password of HTTP Basic authentication (any user name), which GitHub's REST
// API also accepts and ARC v0.27.6's scale-set client sends.
func restCredential(r *http.Request) string {
	if cred := bearer(r); cred != "" {
		return cred
	}
	if _, password, ok := r.BasicAuth(); ok {
		return strings.TrimSpace(password)
	}
	return ""
}

// handleAPI registers a REST endpoint behind GitHub's authentication, rate limits and call
// counting. The pattern is also the route template calls are counted under.
func (s *Server) handleAPI(mux *http.ServeMux, pattern string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() { s.count(pattern, rec.status, rec.Header()) }()
		if status := s.outageStatus(pattern); status != 0 {
			answerOutage(rec, status)
			return
		}
		cred := restCredential(r)
		tok, ok := s.lookupToken(cred)
		if !ok {
			s.answerUnauthenticated(rec, cred == "")
			return
		}
		release, ok := s.admit(rec, cred, r.Method)
		if !ok {
			return
		}
		defer release()
		if tok.kind == tokenInstallation && r.PathValue("enterprise") != "" {
			// Enterprise runner endpoints take a classic token with manage_runners:enterprise;
			// GitHub App installation tokens are refused.
			writeError(rec, http.StatusForbidden, "Resource not accessible by integration", docsRunners)
			return
		}
		if d := s.slowAnswers(); d > 0 {
			answerLate(rec, r, d, h)
			return
		}
		h(rec, r)
	})
}

// lookupToken finds a known, unexpired API token.
func (s *Server) lookupToken(cred string) (apiToken, bool) {
	if cred == "" {
		return apiToken{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.st.apiTokens[cred]
	if !ok || (!tok.expires.IsZero() && !s.now().Before(tok.expires)) {
		return apiToken{}, false
	}
	return tok, true
}

// answerUnauthenticated answers 401 as GitHub does, with the anonymous budget's headers.
func (s *Server) answerUnauthenticated(w http.ResponseWriter, missing bool) {
	s.mu.Lock()
	b := s.budgetFor(anonymousBudget, anonymousLimit)
	b.spend()
	s.setRateHeaders(w, b)
	s.mu.Unlock()
	if missing {
		writeError(w, http.StatusUnauthorized, "Requires authentication", docsREST)
		return
	}
	writeError(w, http.StatusUnauthorized, "Bad credentials", docsREST)
}
