package githubdouble

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// The Actions service is where runner scale sets live: not GitHub's REST API but the service a
// registration token opens (POST /actions/runner-registration answers its URL and an admin
// token). The double serves it under /_services/actions/ and the sessions' message queues under
// /_services/broker/, in the shapes github.com/actions/scaleset sends and decodes; that client
// is its contract. Its calls are counted apart from REST calls (ActionsServiceCalls) and spend
// no REST budget.

const (
	servicePath = "/_services/actions"
	brokerPath  = "/_services/broker"

	// adminTokenTTL is how long an admin token lives. GitHub does not document it; an hour
	// matches the registration token it is minted from.
	adminTokenTTL = time.Hour
	// defaultScaleSetPollWait is the message queue's long poll when Config.ScaleSetPollWait is 0.
	defaultScaleSetPollWait = 50 * time.Second
)

// Exception type names of the Actions service's error bodies, as the service spells them: the
// type's full name, a comma, and its assembly. The scale-set client matches the runner
// exceptions by substring (RunnerExistsError, RunnerNotFoundError, JobStillRunningError);
// runnerflow and ARC go by status and those three.
const (
	// Runner (agent) exceptions, named as the runner's own client declares them
	// (actions/runner, src/Sdk/DTWebApi/WebApi/Exceptions.cs).
	excAgentExists     = "GitHub.DistributedTask.WebApi.TaskAgentExistsException, GitHub.DistributedTask.WebApi"
	excAgentNotFound   = "GitHub.DistributedTask.WebApi.TaskAgentNotFoundException, GitHub.DistributedTask.WebApi"
	excJobStillRunning = "GitHub.DistributedTask.WebApi.TaskAgentJobStillRunningException, GitHub.DistributedTask.WebApi"
	// Scale-set exceptions, as listeners log them: a second session is 409 "... already has an
	// active session for owner ..." (actions/actions-runner-controller #3351, #4285); deleting a
	// session the service no longer has is 400 "The session identifier ... is not valid." (#4285);
	// a set it does not know is 404 "No runner scale set found with identifier ..." (#3935).
	excSessionConflict  = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException, GitHub.Actions.Runtime.WebApi"
	excSessionExpired   = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException, GitHub.Actions.Runtime.WebApi"
	excScaleSetNotFound = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetNotFoundException, GitHub.Actions.Runtime.WebApi"
	// A set created under a name its group has is 400 "The runner scale set already exists in
	// runner group ..." (macstadium/orka-github-actions-integration #63 quotes the answer).
	excScaleSetExists = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetExistsException, GitHub.Actions.Runtime.WebApi"
	// Refreshing a session the service no longer has is 404 RunnerAdminException (quoted in
	// actions/scaleset #123 without its namespace; the namespace here is an assumption).
	excSessionNotFound = "GitHub.Actions.Runtime.WebApi.RunnerAdminException, GitHub.Actions.Runtime.WebApi"
	// Unquoted anywhere public: the runtime namespace by analogy with the sets' own.
	excGroupNotFound     = "GitHub.Actions.Runtime.WebApi.RunnerGroupNotFoundException, GitHub.Actions.Runtime.WebApi"
	excInvalidRequest    = "System.ArgumentException"
	excUnauthorized      = "Microsoft.VisualStudio.Services.Common.VssUnauthorizedException"
	excThrottled         = "Microsoft.VisualStudio.Services.WebApi.RequestThrottledException"
	excServiceUnavailble = "Microsoft.VisualStudio.Services.WebApi.ServiceUnavailableException"
)

// serviceError is an Actions service answer other than success.
type serviceError struct {
	status   int
	typeName string
	message  string
}

func svcErr(status int, typeName, format string, args ...any) *serviceError {
	return &serviceError{status: status, typeName: typeName, message: fmt.Sprintf(format, args...)}
}

// serviceHandler handles one Actions service call for the scope its admin token administers;
// it returns the status and body to answer, or an error. Handlers take s.mu themselves.
type serviceHandler func(r *http.Request, scope Scope, body []byte) (int, any, *serviceError)

func (s *Server) registerActionsService(mux *http.ServeMux) {
	mux.HandleFunc("POST /actions/runner-registration", s.handleRunnerRegistration)
	s.registerScaleSets(mux)
	s.registerMessageQueue(mux)
}

// handleService registers an Actions service route behind its admin-token authentication, its
// faults and its call counting.
func (s *Server) handleService(mux *http.ServeMux, pattern string, h serviceHandler) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		status, out, serr := 0, any(nil), s.serviceFault()
		defer func() { s.countService(pattern, status) }()
		if serr == nil && r.URL.Query().Get("api-version") == "" {
			serr = svcErr(http.StatusBadRequest, excInvalidRequest, "The api-version query parameter is required.")
		}
		var scope Scope
		if serr == nil {
			scope, serr = s.adminScope(r)
		}
		if serr == nil {
			body, err := readBody(r)
			if err != nil {
				serr = svcErr(http.StatusBadRequest, excInvalidRequest, "reading body: %v", err)
			} else {
				status, out, serr = h(r, scope, body)
			}
		}
		status = s.writeServiceAnswer(w, status, out, serr)
	})
}

// writeServiceAnswer writes a success or an exception body and returns the status written.
func (s *Server) writeServiceAnswer(w http.ResponseWriter, status int, out any, serr *serviceError) int {
	if serr != nil {
		if serr.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", fmt.Sprint(s.throttleRetryAfter()))
		}
		writeJSON(w, serr.status, map[string]string{"typeName": serr.typeName, "message": serr.message})
		return serr.status
	}
	if out == nil {
		w.WriteHeader(status)
		return status
	}
	writeJSON(w, status, out)
	return status
}

// adminScope authenticates an Actions service call by its admin token.
func (s *Server) adminScope(r *http.Request) (Scope, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.st.adminTokens[bearer(r)]
	if !ok || !s.now().Before(tok.expires) {
		return Scope{}, svcErr(http.StatusUnauthorized, excUnauthorized, "The admin token is unknown or expired.")
	}
	return tok.scope, nil
}

// handleRunnerRegistration exchanges a registration token ("Authorization: RemoteAuth <token>")
// for the Actions service's URL and an admin token for the registration URL's scope. It is
// on the REST host but authenticated by the registration token, so it spends no REST budget.
func (s *Server) handleRunnerRegistration(w http.ResponseWriter, r *http.Request) {
	const route = "POST /actions/runner-registration"
	rec := &statusRecorder{ResponseWriter: w}
	defer func() { s.count(route, rec.status, rec.Header()) }()
	if status := s.outageStatus(route); status != 0 {
		answerOutage(rec, status)
		return
	}
	var in struct {
		URL         string `json:"url"`
		RunnerEvent string `json:"runner_event"`
	}
	body, err := readBody(r)
	if err != nil || json.Unmarshal(body, &in) != nil {
		writeError(rec, http.StatusBadRequest, "Problems parsing JSON", docsRunners)
		return
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	reg, ok := s.st.regTokens[strings.TrimSpace(token)]
	if !strings.EqualFold(scheme, "RemoteAuth") || !ok || !s.now().Before(reg.expires) {
		writeError(rec, http.StatusUnauthorized, "Bad credentials", docsRunners)
		return
	}
	scope, ok := scopeOfConfigURL(in.URL)
	if !ok || scope.key() != reg.scope.key() {
		writeError(rec, http.StatusForbidden, "The registration token does not belong to "+in.URL, docsRunners)
		return
	}
	admin, err := s.mintAdminToken(reg.scope)
	if err != nil {
		writeError(rec, http.StatusInternalServerError, "signing the admin token failed", docsRunners)
		return
	}
	writeJSON(rec, http.StatusOK, map[string]string{"url": s.baseURL + strings.TrimPrefix(servicePath, "/") + "/", "token": admin})
}

// scopeOfConfigURL reads the scope of a scale set's configuration URL, as the client parses it:
// https://host/org, https://host/owner/repo or https://host/enterprises/slug.
func scopeOfConfigURL(raw string) (Scope, bool) {
	u, err := url.Parse(strings.Trim(raw, "/"))
	if err != nil {
		return Scope{}, false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return OrgScope(parts[0]), true
	case len(parts) == 2 && strings.EqualFold(parts[0], "enterprises"):
		return EnterpriseScope(parts[1]), true
	case len(parts) == 2:
		return RepoScope(parts[0] + "/" + parts[1]), true
	}
	return Scope{}, false
}

// mintAdminToken issues a JWT admin token for a scope; the client reads its expiry from the
// "exp" claim to know when to fetch another. Callers hold s.mu.
func (s *Server) mintAdminToken(scope Scope) (string, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	expires := s.now().Add(adminTokenTTL)
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   scope.String(),
		ExpiresAt: jwt.NewNumericDate(expires),
		IssuedAt:  jwt.NewNumericDate(s.now()),
		ID:        randomAlnum(16),
	}).SignedString(key)
	if err != nil {
		return "", err
	}
	s.st.adminTokens[signed] = scopedToken{scope: scope, expires: expires}
	s.recordSecret(signed)
	return signed, nil
}

// serviceFaults are the Actions service's injected faults. Server.mu guards them.
type serviceFaults struct {
	// callsPerMinute throttles the service; 0 is off (Config.ActionsServiceCallsPerMinute).
	callsPerMinute int
	windowStart    time.Time
	windowCalls    int
	// outage, when non-zero, is the status every Actions service call answers.
	outage int
}

// SetActionsServiceThrottle changes Config.ActionsServiceCallsPerMinute of a running double
// (0 switches the throttle off).
func (s *Server) SetActionsServiceThrottle(callsPerMinute int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.service.callsPerMinute = max(callsPerMinute, 0)
	s.service.windowStart, s.service.windowCalls = time.Time{}, 0
}

// StartActionsServiceOutage makes every Actions service and message-queue call answer status
// (0 means 503) until EndActionsServiceOutage. REST routes are not affected (StartOutage).
func (s *Server) StartActionsServiceOutage(status int) {
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.service.outage = status
}

// EndActionsServiceOutage ends the Actions service's outage, if any.
func (s *Server) EndActionsServiceOutage() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.service.outage = 0
}

// serviceFault is the fault a call meets before anything else: the outage, or the throttle
// once the minute's calls are spent. A refused call does not count against the minute.
func (s *Server) serviceFault() *serviceError {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.service
	if f.outage != 0 {
		return svcErr(f.outage, excServiceUnavailble, "The Actions service is unavailable.")
	}
	if f.callsPerMinute == 0 {
		return nil
	}
	if now := s.now(); f.windowStart.IsZero() || !now.Before(f.windowStart.Add(time.Minute)) {
		f.windowStart, f.windowCalls = now, 0
	}
	if f.windowCalls >= f.callsPerMinute {
		return svcErr(http.StatusTooManyRequests, excThrottled, "Request was blocked due to exceeding usage of resource.")
	}
	f.windowCalls++
	return nil
}

// throttleRetryAfter is the whole seconds until the throttle's minute ends (at least 1).
func (s *Server) throttleRetryAfter() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := s.service.windowStart.Add(time.Minute).Sub(s.now())
	return max(int(math.Ceil(left.Seconds())), 1)
}

func (s *Server) countService(route string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.serviceCalls[CallKey{Route: route, Status: status}]++
}

// ActionsServiceCalls returns how many Actions service calls (scale sets, sessions, message
// queue, scale-set runners) each route answered with each status. They are not REST calls:
// Calls and the REST budget do not include them.
func (s *Server) ActionsServiceCalls() map[CallKey]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.serviceCalls)
}
