package githubdouble

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// GitHub's conditional requests ("Best practices for using the REST API: use conditional
// requests"): most answers carry an ETag, and a request whose If-None-Match names the current
// one is answered 304 Not Modified with no body. A 304 is not charged to the primary budget;
// the double still counts it against the secondary limit (points and concurrency), which is
// stricter than GitHub says, so a client that passes the double passes GitHub. The double
// sends ETags on the workflow-run and job listings, the reads a pull-based scaler repeats.

// writeConditional answers 200 with v and its ETag, or 304 when the request names that ETag;
// a 304 gives the request's primary charge back. Callers hold s.mu.
func (s *Server) writeConditional(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		if b, ok := s.st.budgets[bearer(r)]; ok && b.used > 0 {
			b.used--
			s.setRateHeaders(w, b)
		}
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// etagMatches implements If-None-Match's weak comparison: "*", or any listed tag equal to
// etag once the W/ prefixes are set aside.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}
