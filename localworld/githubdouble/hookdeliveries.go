package githubdouble

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// This file serves the webhook deliveries API: a hook's delivery attempts, newest first with
// cursor pagination, and a redelivery of one attempt (GitHub: "Redeliver"), for the App's own
// webhook (App JWT) and for the double's one hook seen as an organization's or a repository's
// (hookID; it lists the deliveries of that organization's or repository's events). Every
// recorded attempt has an id: its place in the record, from 1.

const docsHookDeliveries = "https://docs.github.com/rest/webhooks/repo-deliveries"

// registerHookDeliveries adds the deliveries endpoints behind GitHub's authentication and limits.
func (s *Server) registerHookDeliveries(mux *http.ServeMux) {
	s.handleApp(mux, "GET /app/hook/deliveries", s.handleListDeliveries)
	s.handleApp(mux, "POST /app/hook/deliveries/{delivery_id}/attempts", s.handleRedeliverAttempt)
	for _, hook := range []string{"/orgs/{org}/hooks/{hook_id}", "/repos/{owner}/{repo}/hooks/{hook_id}"} {
		s.handleAPI(mux, "GET "+hook+"/deliveries", s.handleListDeliveries)
		s.handleAPI(mux, "POST "+hook+"/deliveries/{delivery_id}/attempts", s.handleRedeliverAttempt)
	}
}

// deliveryItem is GitHub's hook-delivery-item.
type deliveryItem struct {
	ID             int64   `json:"id"`
	GUID           string  `json:"guid"`
	DeliveredAt    string  `json:"delivered_at"`
	Redelivery     bool    `json:"redelivery"`
	Duration       float64 `json:"duration"`
	Status         string  `json:"status"`
	StatusCode     int     `json:"status_code"`
	Event          string  `json:"event"`
	Action         *string `json:"action"`
	InstallationID *int64  `json:"installation_id"`
	RepositoryID   *int64  `json:"repository_id"`
	ThrottledAt    *string `json:"throttled_at"`
}

// deliveryOrigin is what a payload says about where its event happened.
type deliveryOrigin struct {
	Repository *struct {
		ID       int64  `json:"id"`
		FullName string `json:"full_name"`
	} `json:"repository"`
	Organization *struct {
		Login string `json:"login"`
	} `json:"organization"`
}

// hookAttempt is one recorded attempt with its id and origin.
type hookAttempt struct {
	id     int64
	d      Delivery
	origin deliveryOrigin
}

// hookAttempts returns the attempts made so far to the hook the request names, newest first,
// or false when that hook does not exist.
func (s *Server) hookAttempts(r *http.Request) ([]hookAttempt, bool) {
	org, repo := r.PathValue("org"), r.PathValue("owner")+"/"+r.PathValue("repo")
	if r.PathValue("hook_id") != "" {
		if id, err := strconv.ParseInt(r.PathValue("hook_id"), 10, 64); err != nil || id != hookID {
			return nil, false
		}
		s.mu.Lock()
		_, orgOK := s.st.orgs[lower(org)]
		_, repoOK := s.st.repos[lower(repo)]
		s.mu.Unlock()
		if (org != "" && !orgOK) || (org == "" && !repoOK) {
			return nil, false
		}
	}
	var out []hookAttempt
	for i, d := range s.hooks.snapshot() {
		if !d.Done || d.DeliveredAt.IsZero() {
			continue // not attempted yet, or never sent (queue full)
		}
		a := hookAttempt{id: int64(i + 1), d: d}
		_ = json.Unmarshal(d.Payload, &a.origin) // the double's own payloads
		if org != "" && (a.origin.Organization == nil || !strings.EqualFold(a.origin.Organization.Login, org)) {
			continue
		}
		if r.PathValue("repo") != "" && (a.origin.Repository == nil || !strings.EqualFold(a.origin.Repository.FullName, repo)) {
			continue
		}
		out = append(out, a)
	}
	slices.Reverse(out)
	return out, true
}

// handleListDeliveries lists a hook's attempts newest first. The cursor "v1_<id>" starts a page
// at that attempt; the Link header's rel="next" carries the next page's cursor, as on GitHub.
func (s *Server) handleListDeliveries(w http.ResponseWriter, r *http.Request) {
	attempts, ok := s.hookAttempts(r)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsHookDeliveries)
		return
	}
	q := r.URL.Query()
	perPage := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(c, "v1_"), 10, 64)
		if err != nil || !strings.HasPrefix(c, "v1_") {
			writeError(w, http.StatusBadRequest, "Invalid cursor", docsHookDeliveries)
			return
		}
		start = len(attempts)
		if i := slices.IndexFunc(attempts, func(a hookAttempt) bool { return a.id <= id }); i >= 0 {
			start = i
		}
	}
	items := []deliveryItem{}
	i := start
	for ; i < len(attempts) && len(items) < perPage; i++ {
		if a := attempts[i]; statusMatches(q.Get("status"), a.d.StatusCode) {
			items = append(items, s.renderDelivery(a))
		}
	}
	if i < len(attempts) {
		next := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		nq := url.Values{"per_page": {strconv.Itoa(perPage)}, "cursor": {fmt.Sprintf("v1_%d", attempts[i].id)}}
		if st := q.Get("status"); st != "" {
			nq.Set("status", st)
		}
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", next.String()))
	}
	writeJSON(w, http.StatusOK, items)
}

// statusMatches implements the status filter: success is a code from 200 to 399, failure one
// from 400 to 599 (GitHub's description; an attempt without an answer matches neither).
func statusMatches(filter string, code int) bool {
	switch filter {
	case "success":
		return code >= 200 && code < 400
	case "failure":
		return code >= 400 && code < 600
	}
	return true
}

func (s *Server) renderDelivery(a hookAttempt) deliveryItem {
	item := deliveryItem{
		ID: a.id, GUID: a.d.ID, DeliveredAt: formatTime(a.d.DeliveredAt), Redelivery: a.d.Redelivery,
		Status: deliveryStatus(a.d.StatusCode), StatusCode: a.d.StatusCode, Event: a.d.Event,
	}
	if a.d.Action != "" {
		action := a.d.Action
		item.Action = &action
	}
	if app := s.cfg.App; app != nil {
		id := app.InstallationID
		item.InstallationID = &id
	}
	if a.origin.Repository != nil {
		id := a.origin.Repository.ID
		item.RepositoryID = &id
	}
	return item
}

// deliveryStatus words an answer as GitHub's deliveries page does.
func deliveryStatus(code int) string {
	switch {
	case code == 0:
		return "failed to connect"
	case code >= 200 && code < 400:
		return "OK"
	}
	return fmt.Sprintf("Invalid HTTP Response: %d", code)
}

// handleRedeliverAttempt sends an attempt's payload again under its guid, now, to the hook's
// current URL, and answers 202 as GitHub does (the attempt shows in the listing once made).
func (s *Server) handleRedeliverAttempt(w http.ResponseWriter, r *http.Request) {
	attempts, ok := s.hookAttempts(r)
	id, err := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	i := slices.IndexFunc(attempts, func(a hookAttempt) bool { return a.id == id })
	if !ok || err != nil || i < 0 {
		writeError(w, http.StatusNotFound, "Not Found", docsHookDeliveries)
		return
	}
	if err := s.hooks.redeliver(attempts[i].d.ID); err != nil {
		writeError(w, http.StatusNotFound, "Not Found", docsHookDeliveries)
		return
	}
	writeJSON(w, http.StatusAccepted, struct{}{})
}
