package githubdouble

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// RunnerClient speaks the double's runner protocol, the way the actions runner talks to GitHub.
type RunnerClient struct {
	BaseURL string
	HTTP    *http.Client
}

// RunnerSession identifies a connected runner. Session is the runner's credential; it is
// secret and belongs in no log.
type RunnerSession struct {
	RunnerID  int64
	Name      string
	Ephemeral bool
	Session   string
}

// AssignedJob is a job handed to a runner.
type AssignedJob struct {
	ID         int64
	RunID      int64
	Repository string
	Labels     []string
}

// RegisterRequest is what config.sh sends to register a runner with a registration token.
type RegisterRequest struct {
	Token, Name string
	Labels      []string
	// RunnerGroup is the group's name; empty means "Default".
	RunnerGroup string
	Ephemeral   bool
}

// Errors of the runner protocol, matched with errors.Is.
var (
	// ErrUnauthorized: the JIT configuration, registration token or session is unknown, expired,
	// or its runner was removed.
	ErrUnauthorized = errors.New("runner protocol: unauthorized")
	// ErrConflict: a session already exists, a name is taken by an online runner, or a job is
	// not (or no longer) the runner's.
	ErrConflict = errors.New("runner protocol: conflict")
	// ErrNotFound: the runner group or job does not exist.
	ErrNotFound = errors.New("runner protocol: not found")
)

// ProtocolError is a runner-protocol answer other than success.
type ProtocolError struct {
	StatusCode int
	Message    string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("runner protocol: %d: %s", e.StatusCode, e.Message)
}

// Is matches ErrUnauthorized, ErrConflict and ErrNotFound by status code.
func (e *ProtocolError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	}
	return false
}

// NewRunnerClient returns a client for the double at baseURL (Server.URL()).
func NewRunnerClient(baseURL string) *RunnerClient {
	return &RunnerClient{BaseURL: baseURL, HTTP: &http.Client{}}
}

// ConnectJIT decodes a JIT config (as written into the runner's secret) and brings the runner
// online. 401-type error if the config is unknown or its runner was removed.
func (c *RunnerClient) ConnectJIT(ctx context.Context, encodedJITConfig string) (RunnerSession, error) {
	var out sessionJSON
	err := c.call(ctx, "", "jit/connect", map[string]string{"encoded_jit_config": encodedJITConfig}, &out)
	return RunnerSession(out), err
}

// RegisterWithToken registers a runner with a registration token (as config.sh does); the
// runner is offline until Connect. A name held by an offline runner of the same scope is
// replaced (config.sh --replace); a name held by an online runner is a conflict.
func (c *RunnerClient) RegisterWithToken(ctx context.Context, req RegisterRequest) (RunnerSession, error) {
	var out sessionJSON
	err := c.call(ctx, "", "register", registerJSON(req), &out)
	return RunnerSession(out), err
}

// Connect brings a registered runner online.
func (c *RunnerClient) Connect(ctx context.Context, s RunnerSession) error {
	return c.call(ctx, s.Session, "connect", struct{}{}, nil)
}

// AcquireJob long-polls up to wait for a job; (nil, nil) when none arrived.
func (c *RunnerClient) AcquireJob(ctx context.Context, s RunnerSession, wait time.Duration) (*AssignedJob, error) {
	var out *assignedJobJSON
	if err := c.call(ctx, s.Session, "acquire", map[string]int64{"wait_ms": wait.Milliseconds()}, &out); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, nil
	}
	job := AssignedJob(*out)
	return &job, nil
}

// CompleteJob reports the conclusion of the runner's job ("success", "failure", "cancelled",
// ...). An ephemeral runner is removed by GitHub right after.
func (c *RunnerClient) CompleteJob(ctx context.Context, s RunnerSession, jobID int64, conclusion string) error {
	return c.call(ctx, s.Session, fmt.Sprintf("jobs/%d/complete", jobID), map[string]string{"conclusion": conclusion}, nil)
}

// Disconnect takes the runner offline; a job it was running fails (conclusion "failure"), as
// GitHub does when it loses a runner.
func (c *RunnerClient) Disconnect(ctx context.Context, s RunnerSession) error {
	return c.call(ctx, s.Session, "disconnect", struct{}{}, nil)
}

// call POSTs one protocol request and decodes a JSON answer into out (left alone on 204).
func (c *RunnerClient) call(ctx context.Context, session, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("runner protocol: encoding %s: %w", path, err)
	}
	url := strings.TrimRight(c.BaseURL, "/") + "/_runner/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("runner protocol: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("Authorization", "Bearer "+session)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("runner protocol: %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("runner protocol: reading %s answer: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &e)
		return &ProtocolError{StatusCode: resp.StatusCode, Message: e.Message}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("runner protocol: decoding %s answer: %w", path, err)
	}
	return nil
}
