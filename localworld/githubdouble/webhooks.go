package githubdouble

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"time"
)

// Delivery is one attempt to deliver a webhook, as GitHub's "Recent Deliveries" lists it.
type Delivery struct {
	// ID is the X-GitHub-Delivery GUID; a redelivery keeps the ID of the original.
	ID     string
	Event  string // "workflow_job" or "ping"
	Action string // "queued", "in_progress", "completed"; empty for ping
	JobID  int64
	// Redelivery marks a delivery sent again with Redeliver.
	Redelivery bool
	URL        string
	Payload    []byte
	// Done is set once the attempt was made, successful or not.
	Done bool
	// StatusCode is the receiver's answer; 0 when the request failed or was never sent.
	StatusCode int
	// Error says why the delivery failed without an HTTP answer.
	Error       string
	DeliveredAt time.Time
}

// Sign computes GitHub's X-Hub-Signature-256 value of a payload: "sha256=" and the hex
// HMAC-SHA256 of the body keyed with the webhook secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// hookID is the id of the double's one webhook.
const hookID = 1

// emitJobEvent queues a workflow_job delivery for a job transition. Callers hold s.mu; the
// queue never blocks, so events leave in the order they happened.
func (s *Server) emitJobEvent(j *job, action string) {
	repo := s.st.repos[j.repoKey]
	payload := map[string]any{
		"action":       action,
		"workflow_job": s.renderJob(j),
		"repository":   s.renderRepository(repo),
		"sender":       s.sender(),
	}
	if org, ok := s.st.orgs[repo.org]; ok {
		payload["organization"] = s.renderOrganization(org)
		if ent, ok := s.st.enterprises[org.enterprise]; ok {
			payload["enterprise"] = s.renderEnterprise(ent)
		}
	}
	if app := s.cfg.App; app != nil {
		payload["installation"] = map[string]any{"id": app.InstallationID, "node_id": nodeID("Installation", app.InstallationID)}
	}
	body, err := json.Marshal(payload)
	if err != nil {
		s.log.Error("encoding workflow_job payload", "jobID", j.ID, "error", err)
		return
	}
	s.hooks.enqueue(Delivery{Event: "workflow_job", Action: action, JobID: j.ID, Payload: body})
}

// SendPing delivers a ping event, as GitHub does when a webhook is created, and returns its
// delivery id.
func (s *Server) SendPing() (string, error) { return s.ping(nil) }

// ping queues a ping delivery to the hook's URL. origin adds where the hook lives (an
// organization's or a repository's, as the payload of a ping through that hook's endpoint
// says); nil is the hook as the App's or as created.
func (s *Server) ping(origin map[string]any) (string, error) {
	s.mu.Lock()
	url, _ := s.hooks.config()
	now := formatTime(s.now())
	hook := map[string]any{
		"id": hookID, "type": "Repository", "name": "web", "active": true,
		"events":     []string{"workflow_job"},
		"config":     map[string]any{"content_type": "json", "insecure_ssl": "0", "url": url},
		"created_at": now, "updated_at": now,
	}
	_, viaOrg := origin["organization"]
	_, viaRepo := origin["repository"]
	switch {
	case viaOrg:
		hook["type"] = "Organization"
	case !viaRepo && s.cfg.App != nil:
		hook["type"], hook["app_id"] = "App", s.cfg.App.ID
	}
	payload := map[string]any{"zen": "Keep it logically awesome.", "hook_id": hookID, "hook": hook, "sender": s.sender()}
	maps.Copy(payload, origin)
	s.mu.Unlock()
	if url == "" {
		return "", errors.New("githubdouble: no webhook URL configured")
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return "", fmt.Errorf("githubdouble: encoding ping: %w", err)
	}
	return s.hooks.enqueue(Delivery{Event: "ping", Payload: body}), nil
}

// SetWebhookURL changes where later events are delivered; empty stops recording events.
func (s *Server) SetWebhookURL(url string) { s.hooks.setURL(url) }

// SetWebhookSecret changes the secret later deliveries are signed with, as editing a hook on
// GitHub does; empty sends them unsigned. A test of a shared world uses it to feed an intake.
func (s *Server) SetWebhookSecret(secret string) {
	if secret != "" {
		s.mu.Lock()
		s.recordSecret(secret)
		s.mu.Unlock()
	}
	s.hooks.setSecret(secret)
}

// Deliveries returns every delivery attempt so far, in the order they were queued.
func (s *Server) Deliveries() []Delivery { return s.hooks.snapshot() }

// Redeliver sends a recorded delivery again under the same delivery id, like GitHub's
// "Redeliver" button; the payload is the original, the URL and secret are the current ones.
func (s *Server) Redeliver(deliveryID string) error { return s.hooks.redeliver(deliveryID) }

// DropWebhooks fails the given share (0 to 1) of later workflow_job deliveries without
// sending them, drawn from Config.WebhookSeed: a delivery GitHub could not make (the receiver
// unreachable, a timeout), recorded in Deliveries as done with an Error and no status. GitHub
// does not retry a failed delivery by itself; Redeliver sends one again. 0 stops dropping.
func (s *Server) DropWebhooks(share float64) { s.hooks.setDrop(min(max(share, 0), 1)) }

// HoldWebhooks parks every later delivery until ReleaseWebhooks, so a test can build up a
// burst and choose the order it arrives in.
func (s *Server) HoldWebhooks() { s.hooks.hold() }

// ReleaseOrder says in which order ReleaseWebhooks sends the parked deliveries.
type ReleaseOrder int

const (
	// ReleaseInOrder sends parked deliveries in the order the events happened.
	ReleaseInOrder ReleaseOrder = iota
	// ReleaseReversed sends the newest first.
	ReleaseReversed
	// ReleaseShuffled sends them in a random order drawn from Config.WebhookSeed.
	ReleaseShuffled
)

// ReleaseWebhooks ends HoldWebhooks and queues the parked deliveries in the given order. It
// returns how many were released. With more than one webhook worker, deliveries may still
// overtake each other in flight, as they do on GitHub.
func (s *Server) ReleaseWebhooks(order ReleaseOrder) int { return s.hooks.release(order) }

// WaitForDeliveries blocks until no delivery is queued or in flight (parked ones do not count),
// or the context ends.
func (s *Server) WaitForDeliveries(ctx context.Context) error { return s.hooks.wait(ctx) }

// send makes one delivery attempt. GitHub gives a receiver 10 seconds and does not retry.
func (hq *hookQueue) send(ctx context.Context, d Delivery, secret string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/githubdouble")
	h.Set("X-GitHub-Event", d.Event)
	h.Set("X-GitHub-Delivery", d.ID)
	h.Set("X-GitHub-Hook-ID", fmt.Sprint(hookID))
	hq.setTargetHeaders(h)
	if secret != "" {
		h.Set("X-Hub-Signature-256", Sign(secret, d.Payload))
	}
	resp, err := hq.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

// setTargetHeaders names the hook's owner: the App installation when an App is configured.
func (hq *hookQueue) setTargetHeaders(h http.Header) {
	if app := hq.app; app != nil {
		h.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
		h.Set("X-GitHub-Hook-Installation-Target-ID", fmt.Sprint(app.ID))
		return
	}
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-GitHub-Hook-Installation-Target-ID", fmt.Sprint(hookID))
}
