package githubdouble

import (
	"net/http"
	"strconv"
)

// This file serves a hook's ping (GitHub: "Ping an organization webhook", "Ping a repository
// webhook"): GitHub answers 204 and sends a ping event to the hook's URL, which its deliveries
// then list like any other attempt. The App's own webhook has no ping endpoint.

const docsHookPing = "https://docs.github.com/rest/orgs/webhooks#ping-an-organization-webhook"

// registerHookPings adds the ping endpoints behind GitHub's authentication and limits.
func (s *Server) registerHookPings(mux *http.ServeMux) {
	s.handleAPI(mux, "POST /orgs/{org}/hooks/{hook_id}/pings", s.handlePing)
	s.handleAPI(mux, "POST /repos/{owner}/{repo}/hooks/{hook_id}/pings", s.handlePing)
}

// handlePing queues a ping to the double's one hook, seen as the organization's or the
// repository's the request names, and answers 204; an unknown hook or owner is 404.
func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) {
	origin, ok := s.pingOrigin(r)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsHookPing)
		return
	}
	if _, err := s.ping(origin); err != nil {
		// GitHub still answers 204 for a hook whose URL does not answer; the double without a
		// URL has no hook to ping at all.
		writeError(w, http.StatusNotFound, "Not Found", docsHookPing)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pingOrigin is the ping payload's organization or repository for the hook the request names,
// or false when there is no such hook.
func (s *Server) pingOrigin(r *http.Request) (map[string]any, bool) {
	if id, err := strconv.ParseInt(r.PathValue("hook_id"), 10, 64); err != nil || id != hookID {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if org := r.PathValue("org"); org != "" {
		o, ok := s.st.orgs[lower(org)]
		if !ok {
			return nil, false
		}
		return map[string]any{"organization": s.renderOrganization(o)}, true
	}
	repo, ok := s.st.repos[lower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	if !ok {
		return nil, false
	}
	return map[string]any{"repository": s.renderRepository(repo)}, true
}
