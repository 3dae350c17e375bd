package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actions/scaleset"
	"github.com/hashicorp/go-retryablehttp"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// ScaleSetConfig configures the Actions service's clients: the same credential as the REST
// client (a token, or a GitHub App installation).
type ScaleSetConfig struct {
	// BaseURL is the REST API base, as GitHubConfig.BaseURL; the scale sets' configuration URLs
	// are derived from it (github.com/<org>, or a GitHub Enterprise Server's root).
	BaseURL string
	Token   string
	// AppID, InstallationID and PrivateKeyPEM authenticate as a GitHub App installation.
	AppID          int64
	InstallationID int64
	PrivateKeyPEM  []byte
	// Timeout bounds one HTTP request; zero means 90 s (a long poll answers within about 50).
	Timeout time.Duration
	Logger  *slog.Logger
}

// ScaleSetClients holds one official client (github.com/actions/scaleset) per scope, so a
// worker fetches an Actions service admin token once per token lifetime, not per call: the
// only REST calls scale sets cost. Tokens stay inside these clients; nothing returns them.
type ScaleSetClients struct {
	cfg     ScaleSetConfig
	webBase string

	mu      sync.Mutex
	clients map[string]*scaleset.Client // by configuration URL
}

// NewScaleSetClients checks cfg; clients are made on first use.
func NewScaleSetClients(cfg ScaleSetConfig) (*ScaleSetClients, error) {
	_, u, err := apiBase(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("scale sets: %w", err)
	}
	app := cfg.AppID != 0 || cfg.InstallationID != 0 || len(cfg.PrivateKeyPEM) > 0
	switch {
	case cfg.Token != "" && app:
		return nil, errors.New("scale sets: configure either a token or a GitHub App, not both")
	case cfg.Token == "" && !app:
		return nil, errors.New("scale sets: no credentials: set a token or a GitHub App")
	case app && (cfg.AppID == 0 || cfg.InstallationID == 0 || len(cfg.PrivateKeyPEM) == 0):
		return nil, errors.New("scale sets: a GitHub App needs an app id, an installation id and a private key")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 90 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &ScaleSetClients{cfg: cfg, webBase: webBase(u), clients: map[string]*scaleset.Client{}}, nil
}

// ConfigURL is a scope's scale-set configuration URL, as the client parses it.
func (c *ScaleSetClients) ConfigURL(scope workflows.Scope) string {
	return scopeWebURL(c.webBase, scope)
}

// For returns the scope's client, making it on first use.
func (c *ScaleSetClients) For(scope workflows.Scope) (*scaleset.Client, error) {
	key := c.ConfigURL(scope)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	info := scaleset.SystemInfo{System: "runnerflow", Subsystem: "worker"}
	var (
		cl  *scaleset.Client
		err error
	)
	if c.cfg.Token != "" {
		cl, err = scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
			GitHubConfigURL: key, PersonalAccessToken: c.cfg.Token, SystemInfo: info,
		}, c.httpOptions()...)
	} else {
		cl, err = scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
			GitHubConfigURL: key, SystemInfo: info,
			GitHubAppAuth: scaleset.GitHubAppAuth{
				ClientID: strconv.FormatInt(c.cfg.AppID, 10), InstallationID: c.cfg.InstallationID, PrivateKey: string(c.cfg.PrivateKeyPEM),
			},
		}, c.httpOptions()...)
	}
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("scale sets: "+err.Error(), workflows.ErrInvalidSpec, nil)
	}
	c.clients[key] = cl
	return cl, nil
}

// Forget drops a scope's client after the service refused its admin token (401): the next
// call makes a new one, which fetches a fresh token. (The client renews its token only by its
// own clock.)
func (c *ScaleSetClients) Forget(scope workflows.Scope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clients, c.ConfigURL(scope))
}

// httpOptions gives every client (and every message session) a retryable HTTP client of its
// own that never retries — Temporal retries, under policy.go — and records each answer's
// status in the call's context (answerOf). Each needs its own: the scale-set client rewrites
// the retry hooks of the HTTP client it is given when it fetches an admin token.
func (c *ScaleSetClients) httpOptions() []scaleset.HTTPOption {
	rc := retryablehttp.NewClient()
	rc.RetryMax = 0
	rc.Logger = nil
	rc.HTTPClient.Timeout = c.cfg.Timeout
	rc.ResponseLogHook = func(_ retryablehttp.Logger, resp *http.Response) {
		if resp.Request == nil {
			return
		}
		if a, ok := resp.Request.Context().Value(answerKey{}).(*answer); ok {
			a.record(resp)
			a.peekMessage(resp)
		}
	}
	return []scaleset.HTTPOption{scaleset.WithRetryableHTTPClint(rc), scaleset.WithLogger(slog.New(requestFailuresAtDebug{c.cfg.Logger.Handler()}))}
}

// requestFailuresAtDebug lowers the HTTP client's "request failed" records to debug: the
// client (v0.4.0) gives the HTTP client its logger, which logs every failed request as an
// error, but each failure is returned to the activity, classified and retried by Temporal
// (log or return, not both), and a poll ended on purpose (a worker stopping) is no failure.
type requestFailuresAtDebug struct{ slog.Handler }

func (h requestFailuresAtDebug) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "request failed" && r.Level > slog.LevelDebug {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestFailuresAtDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestFailuresAtDebug{h.Handler.WithAttrs(attrs)}
}

func (h requestFailuresAtDebug) WithGroup(name string) slog.Handler {
	return requestFailuresAtDebug{h.Handler.WithGroup(name)}
}

// answer is the last HTTP answer a call received: the scale-set client's errors carry the
// status only as text, so the classifier reads it here instead.
type answer struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
	// message is the envelope of the last message a poll was answered with (messageOf).
	message queueMessage
}

// queueMessage is a message-queue answer's envelope: which message, of what type. The client
// fails on a type it does not know without saying which message it was, and a message no
// listener deletes comes back to every session: the poll reads the envelope itself to get
// past it.
type queueMessage struct {
	ID   int64  `json:"messageId"`
	Type string `json:"messageType"`
}

// maxPeekedMessage bounds how much of a message the envelope is read from: a message holds at
// most 50 job messages of a few hundred bytes each.
const maxPeekedMessage = 4 << 20

// peekMessage reads a message-queue answer's envelope and puts the body back for the client.
func (a *answer) peekMessage(resp *http.Response) {
	if resp.StatusCode != http.StatusOK || resp.Request.Method != http.MethodGet || !strings.HasSuffix(resp.Request.URL.Path, "/messages") {
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPeekedMessage))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	var m queueMessage
	if err == nil && json.Unmarshal(body, &m) == nil {
		a.mu.Lock()
		a.message = m
		a.mu.Unlock()
	}
}

// lastMessage is the envelope of the last message a poll was answered with (zero: none).
func (a *answer) lastMessage() queueMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.message
}

type answerKey struct{}

// withAnswer returns a context whose calls record their answers in the returned answer.
func withAnswer(ctx context.Context) (context.Context, *answer) {
	a := &answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

func (a *answer) record(resp *http.Response) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status, a.retryAfter = resp.StatusCode, 0
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		a.retryAfter = time.Duration(secs) * time.Second
	}
}

func (a *answer) last() (int, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, a.retryAfter
}
