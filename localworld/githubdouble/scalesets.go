package githubdouble

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scaleSet is a runner scale set: a named, labelled place in a runner group of a scope, whose
// jobs go only to runners created from its JIT configurations. Jobs and runner events reach
// its listener as messages of its one session.
type scaleSet struct {
	id            int64
	name          string
	scope         Scope
	group         runnerGroup
	labels        []scaleSetLabelJSON
	disableUpdate bool
	created       time.Time
	session       *scaleSetSession
	queue         messageQueue
	jobs          map[int64]bool // ids of its queued and running jobs
	maxCapacity   int            // the last X-ScaleSetMaxCapacity its listener sent
	capacityKnown bool           // whether its listener ever sent one
	dropped       int            // job messages its truncated backlog lost (Config.ScaleSetBacklogLimit)
	refused       int            // session opens refused (409) while another session was kept
	// offers: the set is offered its jobs and acquires them (GHES), rather than being assigned
	// them (github.com). Chosen when it is created, as a set lives on one installation.
	offers bool
}

// labelNames are the labels jobs are matched against.
func (ss *scaleSet) labelNames() []string {
	out := make([]string, 0, len(ss.labels))
	for _, l := range ss.labels {
		out = append(out, l.Name)
	}
	return out
}

type scaleSetLabelJSON struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// scaleSetJSON is the Actions service's RunnerScaleSet.
type scaleSetJSON struct {
	ID                 int64               `json:"id,omitempty"`
	Name               string              `json:"name,omitempty"`
	RunnerGroupID      int64               `json:"runnerGroupId,omitempty"`
	RunnerGroupName    string              `json:"runnerGroupName,omitempty"`
	Labels             []scaleSetLabelJSON `json:"labels,omitempty"`
	RunnerSetting      runnerSettingJSON   `json:"RunnerSetting"`
	CreatedOn          time.Time           `json:"createdOn"`
	RunnerJitConfigURL string              `json:"runnerJitConfigUrl,omitempty"`
	Statistics         *ScaleSetStatistics `json:"statistics,omitempty"`
}

type runnerSettingJSON struct {
	DisableUpdate bool `json:"disableUpdate,omitempty"`
}

// ScaleSet is a snapshot of a runner scale set for tests.
type ScaleSet struct {
	ID              int64
	Name            string
	Scope           Scope
	RunnerGroupID   int64
	RunnerGroupName string
	Labels          []string
	// SessionID and SessionOwner name the open message session; empty when none is open.
	SessionID, SessionOwner string
	// MaxCapacity is the last capacity its listener reported when polling; the service assigns
	// the set no more jobs than that at once. 0 also when none was reported (no bound).
	MaxCapacity int
	// JobOffers: the set is offered its jobs and acquires them (Config.ScaleSetJobOffers,
	// Config.ScaleSetJobOffersFor) rather than being assigned them.
	JobOffers bool
	// DroppedJobMessages counts the job messages its queue dropped once it held
	// Config.ScaleSetBacklogLimit of them.
	DroppedJobMessages int
	// RefusedSessions counts the session opens refused (409) while another session was kept.
	RefusedSessions int
	// Statistics are what the service would tell its listener now.
	Statistics ScaleSetStatistics
}

const scaleSetsRoute = servicePath + "/_apis/runtime/runnerscalesets"

func (s *Server) registerScaleSets(mux *http.ServeMux) {
	s.handleService(mux, "POST "+scaleSetsRoute, s.svcCreateScaleSet)
	s.handleService(mux, "GET "+scaleSetsRoute, s.svcFindScaleSet)
	s.handleService(mux, "GET "+scaleSetsRoute+"/{scale_set_id}", s.svcGetScaleSet)
	s.handleService(mux, "PATCH "+scaleSetsRoute+"/{scale_set_id}", s.svcUpdateScaleSet)
	s.handleService(mux, "DELETE "+scaleSetsRoute+"/{scale_set_id}", s.svcDeleteScaleSet)
	s.handleService(mux, "GET "+servicePath+"/_apis/runtime/runnergroups/{$}", s.svcFindRunnerGroup)
	s.handleService(mux, "GET "+servicePath+"/_apis/runtime/runnergroups", s.svcFindRunnerGroup)
	s.registerScaleSetRunners(mux)
	s.registerSessions(mux)
	s.registerJobAcquisition(mux)
}

// renderScaleSet builds the service's view of a set. Callers hold s.mu.
func (s *Server) renderScaleSet(ss *scaleSet) scaleSetJSON {
	stats := s.statistics(ss)
	return scaleSetJSON{
		ID: ss.id, Name: ss.name, RunnerGroupID: ss.group.id, RunnerGroupName: ss.group.name,
		Labels: slices.Clone(ss.labels), RunnerSetting: runnerSettingJSON{DisableUpdate: ss.disableUpdate},
		CreatedOn:          ss.created.UTC(),
		RunnerJitConfigURL: s.baseURL + strings.TrimPrefix(scaleSetsRoute, "/") + "/" + strconv.FormatInt(ss.id, 10) + "/generatejitconfig",
		Statistics:         &stats,
	}
}

// scaleSetIn resolves {scale_set_id} to a set of the admin token's scope; another scope's set
// is not found, as on GitHub. Callers hold s.mu.
func (s *Server) scaleSetIn(r *http.Request, scope Scope) (*scaleSet, *serviceError) {
	id, err := strconv.ParseInt(r.PathValue("scale_set_id"), 10, 64)
	ss := s.st.scaleSets[id]
	if err != nil || ss == nil || ss.scope.key() != scope.key() {
		return nil, svcErr(http.StatusNotFound, excScaleSetNotFound, "No runner scale set found with identifier %s.", r.PathValue("scale_set_id"))
	}
	return ss, nil
}

// decodeScaleSet reads a RunnerScaleSet body.
func decodeScaleSet(body []byte) (scaleSetJSON, *serviceError) {
	var in scaleSetJSON
	if err := json.Unmarshal(body, &in); err != nil {
		return in, svcErr(http.StatusBadRequest, excInvalidRequest, "The body is not a runner scale set: %v", err)
	}
	for _, l := range in.Labels {
		if strings.TrimSpace(l.Name) == "" {
			return in, svcErr(http.StatusBadRequest, excInvalidRequest, "A label name is empty.")
		}
	}
	return in, nil
}

func (s *Server) svcCreateScaleSet(_ *http.Request, scope Scope, body []byte) (int, any, *serviceError) {
	in, serr := decodeScaleSet(body)
	if serr != nil {
		return 0, nil, serr
	}
	if strings.TrimSpace(in.Name) == "" {
		return 0, nil, svcErr(http.StatusBadRequest, excInvalidRequest, "The runner scale set's name is required.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	group, ok := s.group(scope, cmp.Or(in.RunnerGroupID, defaultGroupID))
	if !ok {
		return 0, nil, svcErr(http.StatusNotFound, excGroupNotFound, "Runner group %d not found.", in.RunnerGroupID)
	}
	if s.scaleSetByName(scope, group.id, in.Name) != nil {
		return 0, nil, errScaleSetExists(group)
	}
	ss := &scaleSet{
		id: s.st.next("scaleset"), name: in.Name, scope: scope, group: group,
		labels: s.keptLabels(scope, in), disableUpdate: in.RunnerSetting.DisableUpdate,
		created: s.now(), jobs: map[int64]bool{}, offers: s.offersJobs(scope, in.Name),
	}
	s.st.scaleSets[ss.id] = ss
	s.log.Debug("scale set created", "scaleSet", ss.name, "scope", scope.String())
	s.routeQueuedToScaleSets()
	return http.StatusOK, s.renderScaleSet(ss), nil
}

// offersJobs reports whether a new set of that scope and name is offered its jobs.
func (s *Server) offersJobs(scope Scope, name string) bool {
	if s.cfg.ScaleSetJobOffers {
		return true
	}
	return s.cfg.ScaleSetJobOffersFor != nil && s.cfg.ScaleSetJobOffersFor(ScaleSetKey{Scope: scope, Name: name})
}

// errScaleSetExists refuses a name the group has as the service does: 400, not 409. A rename
// onto a taken name is assumed to be refused alike.
func errScaleSetExists(group runnerGroup) *serviceError {
	return svcErr(http.StatusBadRequest, excScaleSetExists, "The runner scale set already exists in runner group %s.", group.name)
}

// keptLabels are the labels the service keeps of those a create or an update sent: all of
// them, or only the set's name where Config.ScaleSetNameOnlyLabelsFor says so.
func (s *Server) keptLabels(scope Scope, in scaleSetJSON) []scaleSetLabelJSON {
	if s.cfg.ScaleSetNameOnlyLabelsFor != nil && s.cfg.ScaleSetNameOnlyLabelsFor(ScaleSetKey{Scope: scope, Name: in.Name}) {
		return []scaleSetLabelJSON{{Type: "System", Name: in.Name}}
	}
	return scaleSetLabels(in)
}

// scaleSetLabels are a set's labels: those sent, or its name when none were.
func scaleSetLabels(in scaleSetJSON) []scaleSetLabelJSON {
	if len(in.Labels) == 0 {
		return []scaleSetLabelJSON{{Type: "System", Name: in.Name}}
	}
	out := slices.Clone(in.Labels)
	for i := range out {
		out[i].Type = cmp.Or(out[i].Type, "System")
	}
	return out
}

// serviceList answers a lookup with the service's list shape: {"count": n, "value": [...]}.
func serviceList[T any](out []T) (int, any, *serviceError) {
	return http.StatusOK, map[string]any{"count": len(out), "value": out}, nil
}

// scaleSetByName finds a set by name within a runner group (names compare case-insensitively).
// Callers hold s.mu.
func (s *Server) scaleSetByName(scope Scope, groupID int64, name string) *scaleSet {
	for _, ss := range s.st.scaleSets {
		if ss.scope.key() == scope.key() && (groupID == 0 || ss.group.id == groupID) && strings.EqualFold(ss.name, name) {
			return ss
		}
	}
	return nil
}

func (s *Server) svcFindScaleSet(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	groupID, _ := strconv.ParseInt(r.URL.Query().Get("runnerGroupId"), 10, 64)
	name := r.URL.Query().Get("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []scaleSetJSON{}
	if ss := s.scaleSetByName(scope, groupID, name); ss != nil && name != "" {
		out = append(out, s.renderScaleSet(ss))
	}
	return serviceList(out)
}

func (s *Server) svcGetScaleSet(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	return http.StatusOK, s.renderScaleSet(ss), nil
}

// svcUpdateScaleSet applies the fields sent: a name, a runner group, labels (a list replaces
// the labels; none leaves them), and the runner setting.
func (s *Server) svcUpdateScaleSet(r *http.Request, scope Scope, body []byte) (int, any, *serviceError) {
	in, serr := decodeScaleSet(body)
	if serr != nil {
		return 0, nil, serr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	group := ss.group
	if in.RunnerGroupID != 0 {
		var ok bool
		if group, ok = s.group(scope, in.RunnerGroupID); !ok {
			return 0, nil, svcErr(http.StatusNotFound, excGroupNotFound, "Runner group %d not found.", in.RunnerGroupID)
		}
	}
	name := cmp.Or(strings.TrimSpace(in.Name), ss.name)
	if other := s.scaleSetByName(scope, group.id, name); other != nil && other != ss {
		return 0, nil, errScaleSetExists(group)
	}
	ss.name, ss.group, ss.disableUpdate = name, group, in.RunnerSetting.DisableUpdate
	if len(in.Labels) > 0 {
		in.Name = name
		ss.labels = s.keptLabels(scope, in)
	}
	s.routeQueuedToScaleSets()
	return http.StatusOK, s.renderScaleSet(ss), nil
}

func (s *Server) svcDeleteScaleSet(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	s.deleteScaleSet(ss)
	return http.StatusNoContent, nil, nil
}

// deleteScaleSet removes a set, its session and its message queue. Its idle runners go with it;
// a busy runner finishes its job first. Its queued jobs go back to the queue, where another
// set or a runner may take them. Callers hold s.mu.
func (s *Server) deleteScaleSet(ss *scaleSet) {
	delete(s.st.scaleSets, ss.id)
	s.endSession(ss)
	for _, rn := range s.st.runners {
		if rn.scaleSetID == ss.id && rn.jobID == 0 {
			s.removeRunner(rn)
		}
	}
	for id := range ss.jobs {
		if j := s.st.jobs[id]; j.Status == StatusQueued {
			j.scaleSetID, j.offered, j.assignedAt = 0, false, time.Time{}
		}
	}
	s.log.Debug("scale set deleted", "scaleSet", ss.name, "scope", ss.scope.String())
	s.routeQueuedToScaleSets()
	s.st.wakeWaiters()
}

// DeleteScaleSet deletes a scale set as GitHub does on its own (a set idle for about a week):
// its listener's next call learns it is gone. False when there is no such set.
func (s *Server) DeleteScaleSet(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.st.scaleSets[id]
	if ok {
		s.deleteScaleSet(ss)
	}
	return ok
}

// ScaleSets returns every scale set, ordered by id.
func (s *Server) ScaleSets() []ScaleSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapseAssignments()
	out := make([]ScaleSet, 0, len(s.st.scaleSets))
	for _, ss := range s.st.scaleSets {
		snap := ScaleSet{
			ID: ss.id, Name: ss.name, Scope: ss.scope, RunnerGroupID: ss.group.id, RunnerGroupName: ss.group.name,
			Labels: ss.labelNames(), MaxCapacity: ss.maxCapacity, JobOffers: ss.offers,
			DroppedJobMessages: ss.dropped, RefusedSessions: ss.refused, Statistics: s.statistics(ss),
		}
		if sess := s.liveSession(ss); sess != nil {
			snap.SessionID, snap.SessionOwner = sess.id, sess.owner
		}
		out = append(out, snap)
	}
	slices.SortFunc(out, func(a, b ScaleSet) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// runnerGroupJSON is the Actions service's RunnerGroup.
type runnerGroupJSON struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Size      int    `json:"size"`
	IsDefault bool   `json:"isDefaultGroup"`
}

func (s *Server) svcFindRunnerGroup(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []runnerGroupJSON{}
	if g, ok := s.groupByName(scope, r.URL.Query().Get("groupName")); ok && r.URL.Query().Get("groupName") != "" {
		size := 0
		for _, rn := range s.st.runners {
			if rn.scope.key() == scope.key() && rn.group.id == g.id {
				size++
			}
		}
		out = append(out, runnerGroupJSON{ID: g.id, Name: g.name, Size: size, IsDefault: g.id == defaultGroupID})
	}
	return serviceList(out)
}
