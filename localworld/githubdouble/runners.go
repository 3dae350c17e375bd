package githubdouble

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runner is a self-hosted runner registration.
type runner struct {
	id         int64
	name       string
	scope      Scope
	labels     []string
	group      runnerGroup
	ephemeral  bool
	jit        bool
	online     bool
	jobID      int64 // the job in progress; 0 when idle
	credential string
	connected  bool  // has connected at least once, so GitHub reports a version
	scaleSetID int64 // the scale set whose JIT configuration created it; 0 for none
}

// Runner is a snapshot of a runner registration for tests.
type Runner struct {
	ID              int64
	Name            string
	Scope           Scope
	Labels          []string
	RunnerGroupID   int64
	RunnerGroupName string
	// Ephemeral runners are removed after one job; every JIT runner is ephemeral.
	Ephemeral bool
	// JIT is true for runners created by generate-jitconfig, false for registration tokens.
	JIT bool
	// Status is "online" or "offline", as GitHub reports it.
	Status string
	Busy   bool
	// JobID is the job the runner is running; 0 when idle.
	JobID int64
	// ScaleSetID is the scale set whose JIT configuration created the runner; 0 for none.
	ScaleSetID int64
}

func (r *runner) status() string {
	if r.online {
		return "online"
	}
	return "offline"
}

func (r *runner) snapshot() Runner {
	return Runner{
		ID: r.id, Name: r.name, Scope: r.scope, Labels: slices.Clone(r.labels),
		RunnerGroupID: r.group.id, RunnerGroupName: r.group.name,
		Ephemeral: r.ephemeral, JIT: r.jit, Status: r.status(), Busy: r.jobID != 0, JobID: r.jobID,
		ScaleSetID: r.scaleSetID,
	}
}

// Runners returns every runner of every scope, ordered by id.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Runner, 0, len(s.st.runners))
	for _, r := range s.st.runners {
		out = append(out, r.snapshot())
	}
	slices.SortFunc(out, func(a, b Runner) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// runnerByName finds a runner of a scope by name (GitHub compares names case-insensitively).
// Callers hold s.mu.
func (s *Server) runnerByName(scope Scope, name string) *runner {
	for _, r := range s.st.runners {
		if r.scope.key() == scope.key() && strings.EqualFold(r.name, name) {
			return r
		}
	}
	return nil
}

// newRunner registers a runner and its credential. Callers hold s.mu.
func (s *Server) newRunner(r *runner) *runner {
	r.id = s.st.next("runner")
	r.credential = randomToken("GHDRUNNER")
	s.st.runners[r.id] = r
	s.st.credentials[r.credential] = r.id
	s.recordSecret(r.credential)
	s.log.Debug("runner registered", "runner", r.name, "scope", r.scope.String(), "jit", r.jit)
	return r
}

// removeRunner deletes a registration; a runner waiting for work learns it is gone. Callers
// hold s.mu.
func (s *Server) removeRunner(r *runner) {
	if r.scaleSetID != 0 {
		s.st.goneRunners[r.id] = r.scope.key()
	}
	delete(s.st.runners, r.id)
	delete(s.st.credentials, r.credential)
	s.log.Debug("runner removed", "runner", r.name, "scope", r.scope.String())
	s.st.wakeWaiters()
}

// systemLabels are the labels GitHub applies itself; they are reported as "read-only".
var systemLabels = []string{"self-hosted", "linux", "windows", "macos", "x64", "arm", "arm64"}

// runnerJSON is GitHub's "runner" schema.
type runnerJSON struct {
	ID            int64       `json:"id"`
	Name          string      `json:"name"`
	OS            string      `json:"os"`
	Status        string      `json:"status"`
	Busy          bool        `json:"busy"`
	Ephemeral     bool        `json:"ephemeral"`
	RunnerGroupID int64       `json:"runner_group_id"`
	Labels        []labelJSON `json:"labels"`
	Version       *string     `json:"version,omitempty"`
}

type labelJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// runnerVersion is the runner version reported once a runner has connected.
const runnerVersion = "2.329.0"

// renderRunner builds the API view of a runner. Callers hold s.mu.
func (s *Server) renderRunner(r *runner) runnerJSON {
	out := runnerJSON{
		ID: r.id, Name: r.name, OS: "unknown", Status: r.status(), Busy: r.jobID != 0,
		Ephemeral: r.ephemeral, RunnerGroupID: r.group.id, Labels: make([]labelJSON, 0, len(r.labels)),
	}
	if r.connected {
		out.OS = "Linux"
		v := runnerVersion
		out.Version = &v
	}
	for _, l := range r.labels {
		typ := "custom"
		if slices.Contains(systemLabels, lower(l)) {
			typ = "read-only"
		}
		out.Labels = append(out.Labels, labelJSON{ID: s.labelID(l), Name: l, Type: typ})
	}
	return out
}

// labelID gives each distinct label name a stable id. Callers hold s.mu.
func (s *Server) labelID(name string) int64 {
	id, ok := s.st.labelIDs[lower(name)]
	if !ok {
		id = s.st.next("label")
		s.st.labelIDs[lower(name)] = id
	}
	return id
}

// scopeOf reads the scope from the path values of a runner route.
func scopeOf(r *http.Request) Scope {
	switch {
	case r.PathValue("owner") != "":
		return RepoScope(r.PathValue("owner") + "/" + r.PathValue("repo"))
	case r.PathValue("org") != "":
		return OrgScope(r.PathValue("org"))
	default:
		return EnterpriseScope(r.PathValue("enterprise"))
	}
}

// canonicalScope resolves a scope from a URL to the spelling it was created with, or reports
// that GitHub would answer 404. Callers hold s.mu.
func (s *Server) canonicalScope(sc Scope) (Scope, bool) {
	switch sc.Kind {
	case ScopeRepository:
		if repo, ok := s.st.repos[lower(sc.Name)]; ok {
			return RepoScope(repo.fullName()), true
		}
	case ScopeOrganization:
		if org, ok := s.st.orgs[lower(sc.Name)]; ok {
			return OrgScope(org.login), true
		}
	case ScopeEnterprise:
		if ent, ok := s.st.enterprises[lower(sc.Name)]; ok {
			return EnterpriseScope(ent.slug), true
		}
	}
	return Scope{}, false
}

func (s *Server) handleListRunners(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scope, ok := s.canonicalScope(scopeOf(r))
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsRunners)
		return
	}
	nameFilter := r.URL.Query().Get("name")
	var matched []*runner
	for _, rn := range s.st.runners {
		if rn.scope == scope && (nameFilter == "" || strings.EqualFold(rn.name, nameFilter)) {
			matched = append(matched, rn)
		}
	}
	slices.SortFunc(matched, func(a, b *runner) int { return cmp.Compare(a.id, b.id) })
	page := paginate(r, len(matched))
	out := make([]runnerJSON, 0, page.end-page.start)
	for _, rn := range matched[page.start:page.end] {
		out = append(out, s.renderRunner(rn))
	}
	page.setLink(w, r)
	writeJSON(w, http.StatusOK, struct {
		TotalCount int          `json:"total_count"`
		Runners    []runnerJSON `json:"runners"`
	}{len(matched), out})
	if nameFilter == "" {
		s.afterListPage(scope, page.number)
	}
}

// runnerInScope resolves the {runner_id} of a runner route; GitHub answers 404 for a runner of
// another scope. Callers hold s.mu.
func (s *Server) runnerInScope(w http.ResponseWriter, r *http.Request) (*runner, bool) {
	scope, ok := s.canonicalScope(scopeOf(r))
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsRunners)
		return nil, false
	}
	id, err := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	rn := s.st.runners[id]
	if err != nil || rn == nil || rn.scope != scope {
		writeError(w, http.StatusNotFound, "Not Found", docsRunners)
		return nil, false
	}
	return rn, true
}

func (s *Server) handleGetRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn, ok := s.runnerInScope(w, r); ok {
		writeJSON(w, http.StatusOK, s.renderRunner(rn))
	}
}

func (s *Server) handleDeleteRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, ok := s.runnerInScope(w, r)
	if !ok {
		return
	}
	if rn.jobID != 0 {
		// GitHub refuses to delete a runner in the middle of a job.
		writeJSON(w, http.StatusUnprocessableEntity, apiError{
			Message:          fmt.Sprintf("Bad request - Runner %q is still running a job", rn.name),
			DocumentationURL: docsRunners,
			Status:           "422",
		})
		return
	}
	s.removeRunner(rn)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRegistrationToken(w http.ResponseWriter, r *http.Request) {
	s.issueScopedToken(w, r, "GHDREG")
}

func (s *Server) handleRemoveToken(w http.ResponseWriter, r *http.Request) {
	s.issueScopedToken(w, r, "GHDRMV")
}

// registrationTokenTTL is how long GitHub's registration and remove tokens live.
const registrationTokenTTL = time.Hour

// issueScopedToken creates a registration or remove token for the route's scope.
func (s *Server) issueScopedToken(w http.ResponseWriter, r *http.Request, prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scope, ok := s.canonicalScope(scopeOf(r))
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsRunners)
		return
	}
	token := randomToken(prefix)
	expires := s.now().Add(registrationTokenTTL)
	if prefix == "GHDREG" {
		s.st.regTokens[token] = scopedToken{scope: scope, expires: expires}
	}
	s.recordSecret(token)
	writeJSON(w, http.StatusCreated, struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}{token, formatTime(expires)})
}
