package githubdouble

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

const testToken = "ghp_testtoken0000000000000000000000000000"

// fakeClock is an injectable clock a test advances by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now().Truncate(time.Second)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// world is a double with the standard test topology: an enterprise "megacorp" with
// organization "acme" (repositories acme/app and acme/lib), an organization "solo" outside any
// enterprise (solo/tool), and a user repository "alice/dotfiles".
type world struct {
	*Server
	t *testing.T
}

func startWorld(t *testing.T, cfg Config) *world {
	t.Helper()
	if cfg.Tokens == nil {
		cfg.Tokens = []string{testToken}
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	for _, spec := range []RepositorySpec{
		{FullName: "acme/app", Enterprise: "megacorp"},
		{FullName: "acme/lib", Enterprise: "megacorp"},
		{FullName: "solo/tool"},
		{FullName: "alice/dotfiles", OwnerType: "User"},
	} {
		if err := s.AddRepository(spec); err != nil {
			t.Fatalf("AddRepository(%+v): %v", spec, err)
		}
	}
	return &world{Server: s, t: t}
}

// client returns a go-github client for the double, sending through transport (nil: default).
func (w *world) client(token string, transport http.RoundTripper) *github.Client {
	w.t.Helper()
	base := w.URL()
	opts := []github.ClientOptionsFunc{github.WithURLs(&base, &base)}
	if transport != nil {
		opts = append(opts, github.WithTransport(transport))
	}
	if token != "" {
		opts = append(opts, github.WithAuthToken(token))
	}
	c, err := github.NewClient(opts...)
	if err != nil {
		w.t.Fatalf("github.NewClient: %v", err)
	}
	return c
}

// jit creates a JIT runner in an organization and returns its encoded configuration.
func (w *world) jit(ctx context.Context, c *github.Client, org, name string, labels ...string) (*github.JITRunnerConfig, error) {
	cfg, _, err := c.Actions.CreateOrgJITConfig(ctx, org, github.CreateJITConfigRequest{
		Name: name, RunnerGroupID: 1, Labels: labels,
	})
	return cfg, err
}

// statusOf returns the HTTP status of a go-github error, or 0.
func statusOf(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// hookReceiver collects webhook deliveries.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	received []receivedHook
	status   int
}

type receivedHook struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	hr := &hookReceiver{status: http.StatusOK}
	hr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hr.mu.Lock()
		hr.received = append(hr.received, receivedHook{header: r.Header.Clone(), body: body})
		status := hr.status
		hr.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(hr.Close)
	return hr
}

func (hr *hookReceiver) all() []receivedHook {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	return append([]receivedHook(nil), hr.received...)
}

func (hr *hookReceiver) answer(status int) {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	hr.status = status
}

// waitHooks waits until the double has no delivery queued or in flight.
func waitHooks(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitForDeliveries(ctx); err != nil {
		t.Fatalf("WaitForDeliveries: %v", err)
	}
}

// connectJIT brings a JIT runner online through the runner protocol.
func connectJIT(t *testing.T, s *Server, cfg *github.JITRunnerConfig) RunnerSession {
	t.Helper()
	sess, err := NewRunnerClient(s.URL()).ConnectJIT(context.Background(), cfg.GetEncodedJITConfig())
	if err != nil {
		t.Fatalf("ConnectJIT: %v", err)
	}
	return sess
}

// acquireNow polls once, briefly, for a job.
func acquireNow(t *testing.T, s *Server, sess RunnerSession) *AssignedJob {
	t.Helper()
	j, err := NewRunnerClient(s.URL()).AcquireJob(context.Background(), sess, 0)
	if err != nil {
		t.Fatalf("AcquireJob: %v", err)
	}
	return j
}

func isUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }
