// Package activities holds runnerflow's Temporal activities: one file per external system
// (github.go, kubernetes.go), each activity one idempotent side effect, each system's errors
// classified once into the Temporal application error types of workflows/errors.go. The one
// activity that touches both systems, RegisterRunner, lives in register.go (see there why).
// The pod watcher (podwatcher.go) is not an activity but shares the Kubernetes client.
package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v92/github"

	"github.com/runnerflow/runnerflow/workflows"
)

// GitHub is the narrow part of GitHub's REST API runnerflow uses, addressed by runner scope.
// Errors are go-github's own (classified by classifyGitHubError) or the sentinels below.
type GitHub interface {
	// CreateJITConfig registers a runner and returns its just-in-time configuration (secret).
	CreateJITConfig(ctx context.Context, scope workflows.Scope, req JITRequest) (JITConfig, error)
	// CreateRegistrationToken returns a one-hour registration token (secret).
	CreateRegistrationToken(ctx context.Context, scope workflows.Scope) (string, error)
	// ListRunners lists a scope's runners, all pages; name, when set, keeps only that name.
	ListRunners(ctx context.Context, scope workflows.Scope, name string) ([]RunnerInfo, error)
	// GetRunner reads one runner by id.
	GetRunner(ctx context.Context, scope workflows.Scope, id int64) (RunnerInfo, error)
	// RemoveRunner deletes a runner's registration.
	RemoveRunner(ctx context.Context, scope workflows.Scope, id int64) error
	// RunnerGroupID resolves a runner group name ("" is the Default group).
	RunnerGroupID(ctx context.Context, scope workflows.Scope, name string) (int64, error)
	// ListRuns reads one page of a repository's workflow runs of a status, and ListRunJobs one
	// page (from 1) of a run's jobs, each conditional on etag (github_pull.go).
	ListRuns(ctx context.Context, repo, status, etag string) (RunsPage, error)
	ListRunJobs(ctx context.Context, repo string, runID int64, page int, etag string) (JobsPage, error)
	// RunnerURL is the web URL a runner configures itself against in registration-token mode.
	RunnerURL(scope workflows.Scope) string
	// GetJob reads one workflow job of a repository ("owner/repo").
	GetJob(ctx context.Context, repository string, id int64) (JobInfo, error)
	// WorkflowRunPath reads a run's workflow file path; WorkflowFile reads a file at a ref
	// (github_rungraph.go).
	WorkflowRunPath(ctx context.Context, repo string, runID int64) (string, error)
	WorkflowFile(ctx context.Context, repo, path, ref string) ([]byte, error)
}

// JITRequest describes the runner a JIT configuration is made for.
type JITRequest struct {
	Name          string
	RunnerGroupID int64
	Labels        []string
	WorkFolder    string
}

// JITConfig is a registered runner and its encoded configuration. EncodedConfig is a credential:
// it goes into a Secret and nowhere else.
type JITConfig struct {
	Runner        RunnerInfo
	EncodedConfig string
}

// RunnerInfo is a runner as GitHub reports it.
type RunnerInfo struct {
	ID     int64
	Name   string
	Online bool
	Busy   bool
}

// Sentinel errors of the GitHub client that are not GitHub answers.
var (
	// ErrNoSuchRunnerGroup: the named runner group does not exist in the scope.
	ErrNoSuchRunnerGroup = errors.New("no such runner group")
	// ErrBadScope: the scope is malformed (e.g. a repository without "owner/").
	ErrBadScope = errors.New("malformed runner scope")
)

// EnterpriseCredentialHint says which credential enterprise runners need. GitHub's REST reference
// for every /enterprises/{enterprise}/actions/runners… operation: "OAuth app tokens and personal
// access tokens (classic) need the manage_runners:enterprise scope", and the endpoints "do not work
// with GitHub App user access tokens, GitHub App installation access tokens, or fine-grained
// personal access tokens" (the OpenAPI description marks them enabledForGitHubApps: false).
const EnterpriseCredentialHint = "enterprise runners need a personal access token (classic) with manage_runners:enterprise; " +
	"GitHub Apps cannot manage enterprise runners"

// EnterpriseCredentialError is GitHub's 403 on an enterprise runner endpoint: the credential can
// never manage enterprise runners (an App installation, a fine-grained token) or lacks the scope.
// It wraps GitHub's answer, so it is classified as that answer (Forbidden, not retried); its
// message tells the operator what to configure instead.
type EnterpriseCredentialError struct {
	// App is true when the refused credential is a GitHub App installation.
	App bool
	Err error
}

func (e *EnterpriseCredentialError) Error() string {
	refused := "GitHub refused the token"
	if e.App {
		refused = "GitHub refused the GitHub App installation this worker is configured with"
	}
	return fmt.Sprintf("%s (%s: %v)", EnterpriseCredentialHint, refused, e.Err)
}

func (e *EnterpriseCredentialError) Unwrap() error { return e.Err }

// scopeError explains GitHub's refusal of an enterprise runner endpoint; other errors pass as is.
func (c *GitHubClient) scopeError(scope workflows.Scope, err error) error {
	if scope.Enterprise != "" && isGitHubStatus(err, http.StatusForbidden) {
		return &EnterpriseCredentialError{App: c.app, Err: err}
	}
	return err
}

// defaultRunnerGroupID is the id GitHub gives every organization's and enterprise's Default group
// (repositories only have that one).
const defaultRunnerGroupID = 1

// runnerGroupCacheTTL: group ids change only when an administrator recreates a group, so a name
// is resolved at most once per TTL per worker instead of once per runner.
const runnerGroupCacheTTL = 15 * time.Minute

// GitHubConfig configures the GitHub client: a token, or a GitHub App installation.
type GitHubConfig struct {
	// BaseURL is the REST API base, e.g. https://ghe.example.com/api/v3/; empty means
	// https://api.github.com/.
	BaseURL string
	// Token is a personal access token (classic, or fine-grained with runner administration).
	Token string
	// AppID, InstallationID and the private key (PEM bytes or a file path) authenticate as a
	// GitHub App installation instead of a token.
	AppID          int64
	InstallationID int64
	PrivateKeyPEM  []byte
	PrivateKeyPath string
	// Transport is the HTTP transport under authentication; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds one HTTP request; zero means 20 s.
	Timeout time.Duration
}

// GitHubClient implements GitHub with go-github.
type GitHubClient struct {
	gh      *github.Client
	webBase string
	// app: the credential is a GitHub App installation (named in enterprise refusals).
	app bool
	// appJWT authenticates as the App itself, for its own endpoints (its webhook's
	// deliveries); nil with a token.
	appJWT *github.Client

	mu     sync.Mutex
	groups map[string]cachedGroup
}

type cachedGroup struct {
	id      int64
	expires time.Time
}

var _ GitHub = (*GitHubClient)(nil)

// NewGitHubClient builds a client from cfg. Errors describe what is missing, never a credential.
func NewGitHubClient(cfg GitHubConfig) (*GitHubClient, error) {
	base, u, err := apiBase(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	transport := cfg.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	opts := []github.ClientOptionsFunc{github.WithURLs(&base, &base), github.WithTimeout(timeout), github.WithUserAgent("runnerflow")}
	var appJWT *github.Client
	app := cfg.AppID != 0 || cfg.InstallationID != 0 || len(cfg.PrivateKeyPEM) > 0 || cfg.PrivateKeyPath != ""
	switch {
	case cfg.Token != "" && app:
		return nil, errors.New("github: configure either a token or a GitHub App, not both")
	case cfg.Token != "":
		opts = append(opts, github.WithTransport(transport), github.WithAuthToken(cfg.Token))
	case app:
		key, err := appKey(cfg)
		if err != nil {
			return nil, err
		}
		itr, err := appTransport(cfg, key, transport, strings.TrimSuffix(base, "/"))
		if err != nil {
			return nil, err
		}
		if appJWT, err = appJWTClient(cfg, key, transport, strings.TrimSuffix(base, "/"), opts); err != nil {
			return nil, err
		}
		opts = append(opts, github.WithTransport(itr))
	default:
		return nil, errors.New("github: no credentials: set a token or a GitHub App (id, installation id, private key)")
	}
	gh, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	return &GitHubClient{gh: gh, appJWT: appJWT, webBase: webBase(u), app: app, groups: map[string]cachedGroup{}}, nil
}

// appTransport authenticates as a GitHub App installation (tokens are minted and refreshed by
// ghinstallation against the same base URL, so GitHub Enterprise Server works too).
func appTransport(cfg GitHubConfig, key []byte, transport http.RoundTripper, apiBase string) (*ghinstallation.Transport, error) {
	itr, err := ghinstallation.New(transport, cfg.AppID, cfg.InstallationID, key)
	if err != nil {
		// ghinstallation's parse errors do not contain the key material.
		return nil, fmt.Errorf("github: App private key: %w", err)
	}
	itr.BaseURL = apiBase
	return itr, nil
}

// appKey checks the App's ids and reads its private key.
func appKey(cfg GitHubConfig) ([]byte, error) {
	if cfg.AppID == 0 || cfg.InstallationID == 0 {
		return nil, errors.New("github: a GitHub App needs both an app id and an installation id")
	}
	if len(cfg.PrivateKeyPEM) > 0 {
		return cfg.PrivateKeyPEM, nil
	}
	if cfg.PrivateKeyPath == "" {
		return nil, errors.New("github: a GitHub App needs a private key (PEM or file path)")
	}
	key, err := os.ReadFile(cfg.PrivateKeyPath)
	if err != nil {
		return nil, fmt.Errorf("github: read App private key: %w", err)
	}
	return key, nil
}

// apiBase is the REST API base configured (github.com's when none), ending in "/", as text and
// parsed; an error says the configured value is not an absolute URL.
func apiBase(configured string) (string, *url.URL, error) {
	base := configured
	if base == "" {
		base = "https://api.github.com/"
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", nil, fmt.Errorf("base URL %q is not an absolute URL", configured)
	}
	return base, u, nil
}

// webBase derives the web URL from the API URL: api.github.com → github.com, and GitHub
// Enterprise Server's /api/v3/ → its root; anything else (a test double) is used as is.
func webBase(api *url.URL) string {
	w := *api
	switch {
	case w.Host == "api.github.com":
		w.Host = "github.com"
		w.Path = "/"
	case strings.HasSuffix(w.Path, "/api/v3/"):
		w.Path = strings.TrimSuffix(w.Path, "api/v3/")
	}
	return w.String()
}

// RunnerURL implements GitHub.
func (c *GitHubClient) RunnerURL(scope workflows.Scope) string { return scopeWebURL(c.webBase, scope) }

// scopeWebURL is a scope's page under GitHub's web base: a repository's, an organization's or
// an enterprise's (runners' registration URL and the scale sets' configuration URL alike).
func scopeWebURL(webBase string, scope workflows.Scope) string {
	switch {
	case scope.Repository != "":
		return webBase + scope.Repository
	case scope.Organization != "":
		return webBase + scope.Organization
	}
	return webBase + "enterprises/" + scope.Enterprise
}

// splitRepo splits "owner/repo".
func splitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: repository %q is not owner/repo", ErrBadScope, repo)
	}
	return owner, name, nil
}
