package githubdouble

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// AppConfig describes the one GitHub App installation the double knows.
type AppConfig struct {
	// ID is the App id, the issuer ("iss") of the JWTs the App signs.
	ID int64
	// InstallationID is the installation access tokens can be created for.
	InstallationID int64
	// PublicKey verifies the App's RS256 JWTs.
	PublicKey *rsa.PublicKey
}

// Config configures a Server. Zero values mean the documented defaults.
type Config struct {
	// WebhookURL receives workflow_job and ping deliveries; empty means no webhook (events are
	// not recorded, as GitHub records nothing without a hook). SetWebhookURL changes it later.
	WebhookURL string
	// WebhookSecret signs deliveries (X-Hub-Signature-256).
	WebhookSecret string
	// Tokens are the accepted personal access tokens.
	Tokens []string
	// App, when set, enables GitHub App authentication and adds "installation" to webhooks.
	App *AppConfig
	// RateLimit is the primary request budget per token per RateWindow; 0 means 5000.
	RateLimit int
	// RateWindow is the length of a primary rate-limit window; 0 means one hour.
	RateWindow time.Duration
	// SecondaryPointsPerMinute is GitHub's secondary limit per credential: the points its REST
	// calls may spend in a rolling minute (a GET, HEAD or OPTIONS costs 1, other methods 5).
	// 0 means GitHub's 900; negative switches the points limit off. The limit of 100
	// concurrent requests per credential always holds.
	SecondaryPointsPerMinute int
	// Now is the double's clock; nil means time.Now.
	Now func() time.Time
	// Logger receives debug logs (never credentials); nil discards them.
	Logger *slog.Logger
	// WebhookWorkers is the number of delivery goroutines; 0 means 32: GitHub sends each
	// delivery on its own, so a burst of jobs reaches a hook as many concurrent requests. With
	// 1, deliveries leave in the order the events happened.
	WebhookWorkers int
	// WebhookQueueSize bounds the delivery queue; 0 means 10000. A delivery that does not fit
	// is recorded as failed and not sent.
	WebhookQueueSize int
	// WebhookSeed seeds the shuffle of ReleaseWebhooks(ReleaseShuffled), so a shuffled burst
	// can be replayed; 0 means 1.
	WebhookSeed uint64
	// ScaleSetPollWait is how long a scale set's message-queue poll waits for a message before
	// answering 202; 0 means 50 s, about the Actions service's own long poll.
	ScaleSetPollWait time.Duration
	// ScaleSetSessionTimeout is how long the service keeps a scale set's message session whose
	// holder died (nobody polled or refreshed it): until then a new session on the set is
	// refused 409, after it the next one opens. A session its holder closes frees the set at
	// once. 0 means two minutes; GitHub does not document the figure, so it is an assumption.
	ScaleSetSessionTimeout time.Duration
	// ActionsServiceCallsPerMinute throttles the Actions service (scale sets, sessions, message
	// queue, runners): calls beyond it in a minute of the double's clock get 429 with
	// Retry-After. 0 means no throttle. GitHub publishes no limits for the Actions service; this
	// is an assumption to test a client's back-off, off by default.
	ActionsServiceCallsPerMinute int
	// ScaleSetJobOffers serves every scale set of the world as GitHub Enterprise Server does
	// (actions/scaleset #75) and as ARC v0.27.6's client expects: a set is offered a job
	// (JobAvailable) and holds it only once its listener acquires it (POST acquirejobs), which
	// assigns it (JobAssigned). Off, a set is assigned its jobs at once, as on github.com,
	// unless ScaleSetJobOffersFor chooses otherwise for it.
	ScaleSetJobOffers bool
	// ScaleSetJobOffersFor, when ScaleSetJobOffers is off, chooses the offering flow per set, so
	// one world runs a GHES-like set beside a github.com-like one: it is asked once, when the set
	// is created, and a set it answers true for is offered its jobs. JobOffersFor builds one
	// from scopes and set names; nil offers to no set.
	ScaleSetJobOffersFor func(ScaleSetKey) bool
	// ScaleSetNameOnlyLabelsFor chooses the sets that keep only their name as their label, as
	// GHES without custom scale-set labels does (before 3.21, unless the appliance's
	// DistributedTask.AllowRunnerScaleSetCustomLabels flag is on): the other labels a create
	// or an update sends are dropped without an error (the client's README, "GitHub Enterprise
	// Server"). ScaleSetsMatching builds one; nil keeps every label sent.
	ScaleSetNameOnlyLabelsFor func(ScaleSetKey) bool
	// ScaleSetUnknownMessages puts a message of a type no client knows into every set's queue,
	// ahead of each batch of job messages, in a job message's place or in a queue message's
	// (UnknownJobMessages, UnknownQueueMessages), to show that a listener does not stall on one.
	// Off by default.
	ScaleSetUnknownMessages UnknownMessages
	// ScaleSetReassignAfter is how long a job assigned to a scale set waits for one of the
	// set's runners before the service takes it back and assigns it again, up to
	// ScaleSetMaxReassignments times, then cancels it. 0 (the default) never takes a job back,
	// so a world's slow starts never cancel jobs; tests and the soak turn it on
	// (SetScaleSetReassignAfter). DefaultScaleSetReassignAfter is the service's timing as far as
	// the public record shows it.
	ScaleSetReassignAfter time.Duration
	// ScaleSetMessageIDsPerSession numbers each session's messages from 1 (its undeleted ones
	// renumbered when it opens) instead of from one counter that rises across sessions, the
	// double's assumption; the public record settles neither.
	ScaleSetMessageIDsPerSession bool
	// ScaleSetBacklogLimit is the most job messages the service keeps for a set, delivered or
	// not: further ones are dropped, as the client README warns that large backlogs are
	// truncated, while the set's statistics still count every job. How much the service keeps
	// is not public; ScaleSetMessageBatch is the strictest reading. 0 keeps every message.
	ScaleSetBacklogLimit int
	// ScaleSetRemovalOfGoneRunners answers the removal of a set's runner that is gone (it
	// finished its job as an ephemeral runner, or was removed before) with success (204), as
	// an idempotent delete, instead of 404 TaskAgentNotFoundException. Which of the two GitHub
	// answers is not public. ARC gha-runner-scale-set 0.14.2 removes every runner it deletes
	// (its finalizer), those that finished their job included, and takes any answer but 204
	// for a failure it retries without end; its users do not see every runner stuck, which
	// points to 204. Off (404) by default; the ARC scale-set world turns it on.
	ScaleSetRemovalOfGoneRunners bool
}

// ScaleSetKey names a scale set for Config.ScaleSetJobOffersFor: its scope and its name.
type ScaleSetKey struct {
	Scope Scope
	Name  string
}

// ScaleSetsMatching is a chooser of scale sets for Config.ScaleSetJobOffersFor or
// Config.ScaleSetNameOnlyLabelsFor: a key with a name matches the set of that name in its scope
// (case-insensitively, as the service compares names); a key without one matches every set of
// its scope.
func ScaleSetsMatching(keys ...ScaleSetKey) func(ScaleSetKey) bool {
	return func(set ScaleSetKey) bool {
		return slices.ContainsFunc(keys, func(k ScaleSetKey) bool {
			return k.Scope.key() == set.Scope.key() && (k.Name == "" || strings.EqualFold(k.Name, set.Name))
		})
	}
}

// JobOffersFor is ScaleSetsMatching, named for Config.ScaleSetJobOffersFor.
func JobOffersFor(keys ...ScaleSetKey) func(ScaleSetKey) bool { return ScaleSetsMatching(keys...) }

// Server is a running GitHub double. All state sits behind one mutex; ids come from counters,
// so a scenario replayed against a fresh Server yields the same ids.
type Server struct {
	cfg      Config
	now      func() time.Time
	log      *slog.Logger
	listener net.Listener
	srv      *http.Server
	baseURL  string
	done     chan struct{}
	closing  sync.Once
	hooks    *hookQueue

	mu sync.Mutex
	st *state
	// outage, when set, makes REST routes answer a server error (StartOutage).
	outage *Outage
	// slow, when positive, holds every REST answer back that long (SetSlowAnswers).
	slow time.Duration
	// service holds the Actions service's faults: its throttle and outage.
	service serviceFaults
	// listRemoval, when set, removes runners after a runner listing's page (RemoveAfterListPage).
	listRemoval *listRemoval
	// lapse fires at lapseAt, the earliest time a scale-set job's assignment may lapse
	// (Config.ScaleSetReassignAfter); nil when none is pending.
	lapse   *time.Timer
	lapseAt time.Time
}

// Start starts a double listening on 127.0.0.1 on a free port.
func Start(cfg Config) (*Server, error) {
	if cfg.App != nil && cfg.App.PublicKey == nil {
		return nil, errors.New("githubdouble: App.PublicKey is required when App is set")
	}
	if cfg.RateLimit < 0 || cfg.RateWindow < 0 || cfg.WebhookWorkers < 0 || cfg.WebhookQueueSize < 0 {
		return nil, errors.New("githubdouble: negative RateLimit, RateWindow, WebhookWorkers or WebhookQueueSize")
	}
	if cfg.ScaleSetPollWait < 0 || cfg.ScaleSetSessionTimeout < 0 || cfg.ActionsServiceCallsPerMinute < 0 ||
		cfg.ScaleSetBacklogLimit < 0 || cfg.ScaleSetReassignAfter < 0 {
		return nil, errors.New("githubdouble: negative ScaleSetPollWait, ScaleSetSessionTimeout, ActionsServiceCallsPerMinute, " +
			"ScaleSetBacklogLimit or ScaleSetReassignAfter")
	}
	if cfg.ScaleSetUnknownMessages < NoUnknownMessages || cfg.ScaleSetUnknownMessages > UnknownQueueMessages {
		return nil, fmt.Errorf("githubdouble: ScaleSetUnknownMessages %d is none of the UnknownMessages", cfg.ScaleSetUnknownMessages)
	}
	applyDefaults(&cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("githubdouble: listen: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		now:      cfg.Now,
		log:      cfg.Logger,
		listener: ln,
		baseURL:  "http://" + ln.Addr().String() + "/",
		done:     make(chan struct{}),
		st:       newState(cfg),
		service:  serviceFaults{callsPerMinute: cfg.ActionsServiceCallsPerMinute},
	}
	s.hooks = newHookQueue(cfg)
	s.srv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("github double stopped serving", "error", err)
		}
	}()
	s.hooks.start()
	return s, nil
}

// defaultRateLimit is GitHub's hourly budget for a personal access token.
const defaultRateLimit = 5000

func applyDefaults(cfg *Config) {
	if cfg.RateLimit == 0 {
		cfg.RateLimit = defaultRateLimit
	}
	if cfg.SecondaryPointsPerMinute == 0 {
		cfg.SecondaryPointsPerMinute = DefaultSecondaryPointsPerMinute
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WebhookWorkers == 0 {
		cfg.WebhookWorkers = 32
	}
	if cfg.WebhookQueueSize == 0 {
		cfg.WebhookQueueSize = 10000
	}
	if cfg.WebhookSeed == 0 {
		cfg.WebhookSeed = 1
	}
	if cfg.ScaleSetPollWait == 0 {
		cfg.ScaleSetPollWait = defaultScaleSetPollWait
	}
	if cfg.ScaleSetSessionTimeout == 0 {
		cfg.ScaleSetSessionTimeout = defaultScaleSetSessionTimeout
	}
}

// URL is the API base URL with a trailing slash, as go-github's WithURLs and ghinstallation's
// BaseURL expect it.
func (s *Server) URL() string { return s.baseURL }

// Close stops the server, ends long polls and stops webhook delivery. Deliveries still queued
// are dropped.
func (s *Server) Close() {
	s.closing.Do(func() {
		close(s.done)
		s.mu.Lock()
		if s.lapse != nil {
			s.lapse.Stop()
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		s.hooks.stop()
	})
}

// scopePrefixes are the three places self-hosted runners can be registered.
var scopePrefixes = []string{"/repos/{owner}/{repo}", "/orgs/{org}", "/enterprises/{enterprise}"}

// routes registers every endpoint. Each pattern string doubles as the route template under
// which calls are counted.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range scopePrefixes {
		s.handleAPI(mux, "POST "+p+"/actions/runners/registration-token", s.handleRegistrationToken)
		s.handleAPI(mux, "POST "+p+"/actions/runners/remove-token", s.handleRemoveToken)
		s.handleAPI(mux, "POST "+p+"/actions/runners/generate-jitconfig", s.handleGenerateJITConfig)
		s.handleAPI(mux, "GET "+p+"/actions/runners", s.handleListRunners)
		s.handleAPI(mux, "GET "+p+"/actions/runners/{runner_id}", s.handleGetRunner)
		s.handleAPI(mux, "DELETE "+p+"/actions/runners/{runner_id}", s.handleDeleteRunner)
	}
	s.handleAPI(mux, "GET /repos/{owner}/{repo}/actions/runs", s.handleListRuns)
	s.handleAPI(mux, "GET /repos/{owner}/{repo}/actions/runs/{run_id}", s.handleGetRun)
	s.handleAPI(mux, "GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", s.handleListJobs)
	s.handleAPI(mux, "GET /repos/{owner}/{repo}/actions/jobs/{job_id}", s.handleGetJob)
	s.handleAPI(mux, "GET /repos/{owner}/{repo}/contents/{path...}", s.handleGetContent)
	s.handleApp(mux, "POST /app/installations/{installation_id}/access_tokens", s.handleAccessToken)
	s.registerHookDeliveries(mux)
	s.registerHookPings(mux)
	s.registerRunnerProtocol(mux)
	s.registerActionsService(mux)
	// GitHub Enterprise Server serves the REST API under /api/v3, and the scale-set client
	// derives that base from any configuration URL that is not github.com's.
	mux.Handle("/api/v3/", http.StripPrefix("/api/v3", mux))
	mux.HandleFunc("/", s.handleUnknownRoute)
	return mux
}

// handleUnknownRoute answers like GitHub does for a path it does not serve.
func (s *Server) handleUnknownRoute(w http.ResponseWriter, r *http.Request) {
	s.count(routeUnmatched, http.StatusNotFound, nil)
	writeError(w, http.StatusNotFound, "Not Found", docsREST)
}

// routeUnmatched is the route template calls to unknown paths are counted under.
const routeUnmatched = "(unmatched)"

const (
	docsREST      = "https://docs.github.com/rest"
	docsRunners   = "https://docs.github.com/rest/actions/self-hosted-runners"
	docsRateLimit = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-rate-limit"
	docsSecondary = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	docsAppAuth   = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
)

// apiError is GitHub's error body: basic-error, or validation-error-simple when Errors is set.
type apiError struct {
	Message          string   `json:"message"`
	DocumentationURL string   `json:"documentation_url"`
	Status           string   `json:"status"`
	Errors           []string `json:"errors,omitempty"`
}

func writeError(w http.ResponseWriter, status int, message, docURL string) {
	writeJSON(w, status, apiError{Message: message, DocumentationURL: docURL, Status: fmt.Sprint(status)})
}

// writeValidationError answers 422 the way GitHub does for a body that fails its schema.
func writeValidationError(w http.ResponseWriter, problem, docURL string) {
	writeJSON(w, http.StatusUnprocessableEntity, apiError{
		Message:          "Invalid request.\n\n" + problem,
		DocumentationURL: docURL,
		Status:           "422",
		Errors:           []string{problem},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// maxBody bounds request bodies; GitHub's runner endpoints take a few hundred bytes.
const maxBody = 1 << 20

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

// statusRecorder remembers the status a handler wrote, for counting.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// formatTime renders a time the way GitHub does: UTC, whole seconds.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// lower folds names: GitHub's owner, repository, organization and enterprise names are
// case-insensitive in URLs.
func lower(s string) string { return strings.ToLower(s) }
