// Package webhook is the starter's GitHub webhook intake: it verifies and parses deliveries with
// go-github, routes workflow_job events to a pool, hands them to that pool's scale window with
// signal-with-start (deliveries that arrive together share one signal), forwards job
// started/completed notices to the runner workflow they name, and answers fast. It holds no
// state of its own beyond the deliveries still waiting for their signal, none of them yet
// acknowledged: Temporal is the state store, and the pool table is a cache of the running pool
// workflows.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/google/go-github/v92/github"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/internal/groupcommit"
	"github.com/runnerflow/runnerflow/internal/metrics"
	"github.com/runnerflow/runnerflow/workflows"
)

// Temporal is the part of the Temporal client the intake uses; client.Client satisfies it.
type Temporal interface {
	PoolLister
	SignalWithStartWorkflow(ctx context.Context, workflowID string, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
	SignalWorkflow(ctx context.Context, workflowID string, runID string, signalName string, arg any) error
	CheckHealth(ctx context.Context, request *client.CheckHealthRequest) (*client.CheckHealthResponse, error)
}

// Config configures a Handler.
type Config struct {
	// Secret is the webhook secret; required.
	Secret []byte
	// Temporal is the client deliveries are handed to; required.
	Temporal Temporal
	// Pools is the routing table; nil means a new table listing pools through Temporal (the
	// caller then runs Pools().Run to keep it fresh).
	Pools *PoolTable
	// Logger receives one line per delivery (never the payload); nil discards.
	Logger *slog.Logger
	// Metrics counts deliveries; nil means unregistered series.
	Metrics *Metrics
	// Window is the scale-window length new windows get; zero means the workflow's default.
	Window time.Duration
	// Timeout bounds the Temporal calls of one delivery; zero means
	// workflows.WebhookTemporalTimeout.
	Timeout time.Duration
	// WindowSignalTimeout bounds a scale window's signal from its oldest event's arrival,
	// past the deliveries it carries (see package groupcommit); zero means
	// workflows.WebhookWindowSignalTimeout.
	WindowSignalTimeout time.Duration
}

// Handler serves GitHub webhook deliveries. It is safe for concurrent use.
type Handler struct {
	cfg Config
	log *slog.Logger
	// windows batches the events bound for each scale window into shared signals.
	windows *groupcommit.Queue[workflows.WorkflowJobEvent]
}

// NewHandler checks the configuration and returns a handler. It refuses to work without a
// webhook secret: an unsigned intake would let anyone create runners.
func NewHandler(cfg Config) (*Handler, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("webhook: a webhook secret is required")
	}
	if cfg.Temporal == nil {
		return nil, errors.New("webhook: a Temporal client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Pools == nil {
		cfg.Pools = NewPoolTable(cfg.Temporal, 0, cfg.Logger)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = workflows.WebhookTemporalTimeout
	}
	if cfg.WindowSignalTimeout <= 0 {
		cfg.WindowSignalTimeout = workflows.WebhookWindowSignalTimeout
	}
	// A window's signal must not end before the deliveries waiting for it do.
	cfg.WindowSignalTimeout = max(cfg.WindowSignalTimeout, cfg.Timeout)
	h := &Handler{cfg: cfg, log: cfg.Logger}
	h.windows = groupcommit.New(h.signalWindow, groupcommit.Options{
		MaxBatch: workflows.WorkflowJobsSignalMaxEvents, Hold: cfg.WindowSignalTimeout, Observe: cfg.Metrics.observeWindowSignal,
	})
	return h, nil
}

// Pools is the handler's routing table.
func (h *Handler) Pools() *PoolTable { return h.cfg.Pools }

// Routes serves the webhook at POST /webhook (and POST /, for a hook configured without a
// path), liveness at /healthz and readiness (Temporal reachable) at /readyz.
func (h *Handler) Routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", h)
	mux.Handle("POST /{$}", h)
	mux.HandleFunc("GET /healthz", metrics.Healthz)
	mux.Handle("GET /readyz", metrics.Readyz(h.Ready))
	return mux
}

// Ready reports whether Temporal answers its health check: a starter that cannot reach
// Temporal would answer every delivery 503, so it should get no traffic.
func (h *Handler) Ready(ctx context.Context) error {
	if _, err := h.cfg.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return errors.New("temporal unreachable")
	}
	return nil
}

// answer is how one delivery was handled.
type answer struct {
	status  int
	outcome string
	// detail is logged and sent to GitHub (it shows in the delivery log); never payload data.
	detail string
}

// ServeHTTP handles one webhook delivery: read within GitHub's size limit, verify, parse, act,
// answer. Every path answers; none panics on bad input.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	delivery := github.DeliveryID(r)
	event := github.WebHookType(r)
	a, action := h.handle(w, r, delivery, event)
	elapsed := time.Since(start)
	h.cfg.Metrics.Events(event, a.outcome).Inc()
	h.cfg.Metrics.ack.Observe(elapsed.Seconds())
	level := slog.LevelInfo
	if a.status >= 500 {
		level = slog.LevelWarn
	}
	h.log.Log(r.Context(), level, "webhook delivery", "deliveryID", delivery, "event", eventLabel(event),
		"action", action, "status", a.status, "outcome", a.outcome, "detail", a.detail, "elapsed", elapsed)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(a.status)
	fmt.Fprintln(w, a.outcome+": "+a.detail)
}

// handle runs the checks in order — size, signature, body — then the event's action.
func (h *Handler) handle(w http.ResponseWriter, r *http.Request, delivery, event string) (answer, string) {
	payload, bad := h.verifiedPayload(w, r)
	if bad != nil {
		return *bad, ""
	}
	if !json.Valid(payload) {
		return answer{http.StatusBadRequest, OutcomeMalformed, "payload is not valid JSON"}, ""
	}
	switch event {
	case "ping":
		if _, err := github.ParseWebHook(event, payload); err != nil {
			return answer{http.StatusBadRequest, OutcomeMalformed, "ping: " + err.Error()}, ""
		}
		return answer{http.StatusOK, OutcomePong, "webhook reached runnerflow"}, ""
	case "workflow_job":
		je, err := parseWorkflowJob(delivery, payload)
		if err != nil {
			return answer{http.StatusBadRequest, OutcomeMalformed, "workflow_job: " + err.Error()}, ""
		}
		// The event's own time: its pool counts a queued job's reservation from it, however
		// long the batch then waits to reach the pool (WorkflowJobEvent.At).
		je.event.At = time.Now().UTC()
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
		defer cancel()
		return h.onWorkflowJob(ctx, je), je.event.Action
	}
	return answer{http.StatusOK, OutcomeIgnored, "runnerflow acts on workflow_job events only"}, ""
}

// verifiedPayload reads the body (at most GitHub's 25 MB), checks its X-Hub-Signature-256 with
// go-github, and returns the JSON payload (go-github also unwraps form-encoded deliveries).
func (h *Handler) verifiedPayload(w http.ResponseWriter, r *http.Request) ([]byte, *answer) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, workflows.WebhookMaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &answer{http.StatusRequestEntityTooLarge, OutcomeTooLarge, "body exceeds GitHub's 25 MB webhook limit"}
	case err != nil:
		return nil, &answer{http.StatusBadRequest, OutcomeMalformed, "reading body failed"}
	}
	// Only the SHA-256 signature counts: GitHub always sends it, and SHA-1 is not trusted.
	if err := github.ValidateSignature(r.Header.Get(github.SHA256SignatureHeader), body, h.cfg.Secret); err != nil {
		return nil, &answer{http.StatusUnauthorized, OutcomeBadSignature, "missing or wrong X-Hub-Signature-256"}
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mediaType != "application/json" && mediaType != "application/x-www-form-urlencoded") {
		return nil, &answer{http.StatusUnsupportedMediaType, OutcomeUnsupported, "content type must be application/json or application/x-www-form-urlencoded"}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	payload, err := github.ValidatePayload(r, h.cfg.Secret)
	if err != nil {
		return nil, &answer{http.StatusBadRequest, OutcomeMalformed, "payload could not be read from the body"}
	}
	return payload, nil
}
