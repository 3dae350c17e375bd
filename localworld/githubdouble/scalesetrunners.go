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

// Runners of scale sets, made from a set's JIT configurations, and the job messages their
// set's listener hears of (JobAvailable, JobAssigned, JobStarted, JobCompleted).

const agentsRoute = servicePath + "/_apis/distributedtask/pools/0/agents"

func (s *Server) registerScaleSetRunners(mux *http.ServeMux) {
	s.handleService(mux, "POST "+scaleSetsRoute+"/{scale_set_id}/generatejitconfig", s.svcGenerateJIT)
	s.handleService(mux, "GET "+agentsRoute, s.svcFindRunner)
	s.handleService(mux, "GET "+agentsRoute+"/{runner_id}", s.svcGetRunner)
	s.handleService(mux, "DELETE "+agentsRoute+"/{runner_id}", s.svcRemoveRunner)
}

// ScaleSetStatistics are the counts the service sends a set's listener with every message.
type ScaleSetStatistics struct {
	TotalAvailableJobs     int `json:"totalAvailableJobs"`
	TotalAcquiredJobs      int `json:"totalAcquiredJobs"`
	TotalAssignedJobs      int `json:"totalAssignedJobs"`
	TotalRunningJobs       int `json:"totalRunningJobs"`
	TotalRegisteredRunners int `json:"totalRegisteredRunners"`
	TotalBusyRunners       int `json:"totalBusyRunners"`
	TotalIdleRunners       int `json:"totalIdleRunners"`
}

// Job message types, as the scale-set client decodes them.
const (
	jobAvailable = "JobAvailable"
	jobAssigned  = "JobAssigned"
	jobStarted   = "JobStarted"
	jobCompleted = "JobCompleted"
)

// jobMessageJSON is one job message of a batch. RunnerRequestID is the double's job id (the
// REST API's), and JobID the same number as a string.
type jobMessageJSON struct {
	MessageType        string    `json:"messageType"`
	RunnerRequestID    int64     `json:"runnerRequestId"`
	RepositoryName     string    `json:"repositoryName"`
	OwnerName          string    `json:"ownerName"`
	JobID              string    `json:"jobId"`
	JobWorkflowRef     string    `json:"jobWorkflowRef"`
	JobDisplayName     string    `json:"jobDisplayName"`
	WorkflowRunID      int64     `json:"workflowRunId"`
	EventName          string    `json:"eventName"`
	RequestLabels      []string  `json:"requestLabels"`
	QueueTime          time.Time `json:"queueTime"`
	ScaleSetAssignTime time.Time `json:"scaleSetAssignTime"`
	RunnerAssignTime   time.Time `json:"runnerAssignTime"`
	FinishTime         time.Time `json:"finishTime"`
	RunnerID           int64     `json:"runnerId,omitempty"`
	RunnerName         string    `json:"runnerName,omitempty"`
	Result             string    `json:"result,omitempty"`
}

// serviceResults maps a job's REST conclusion to the Actions service's result.
var serviceResults = map[string]string{
	ConclusionSuccess: "succeeded", ConclusionFailure: "failed", ConclusionCancelled: "canceled",
}

// pushJobMessage adds a job message of a type about a job to the set's queue. Callers hold s.mu.
func (s *Server) pushJobMessage(ss *scaleSet, typ string, j *job, rn *runner) {
	s.pushMessage(ss, s.jobMessage(typ, j, rn))
}

// pushMessage adds a job message to the set's queue and wakes its long poll. A queue holding
// Config.ScaleSetBacklogLimit job messages already drops it, counted: the backlog is truncated,
// and only the statistics, which count jobs rather than messages, still tell of its job.
// Callers hold s.mu.
func (s *Server) pushMessage(ss *scaleSet, m jobMessageJSON) {
	if limit := s.cfg.ScaleSetBacklogLimit; limit > 0 && ss.queue.kept() >= limit {
		ss.dropped++
		return
	}
	ss.queue.pending = append(ss.queue.pending, m)
	s.st.wakeWaiters()
}

// jobMessage is a job message of a type about a job (and its runner, if any). Callers hold s.mu.
func (s *Server) jobMessage(typ string, j *job, rn *runner) jobMessageJSON {
	owner, repo, _ := strings.Cut(j.Repository, "/")
	m := jobMessageJSON{
		MessageType: typ, RunnerRequestID: j.ID, RepositoryName: repo, OwnerName: owner,
		JobID: strconv.FormatInt(j.ID, 10), JobDisplayName: j.Name, WorkflowRunID: j.RunID,
		JobWorkflowRef: j.Repository + "/.github/workflows/" + lower(j.Workflow) + ".yml@refs/heads/" + j.HeadBranch,
		EventName:      "push", RequestLabels: slices.Clone(j.Labels), QueueTime: j.CreatedAt.UTC(),
		ScaleSetAssignTime: j.CreatedAt.UTC(),
	}
	if j.Status != StatusQueued && j.RunnerID != 0 {
		m.RunnerAssignTime = j.StartedAt.UTC()
	}
	if rn != nil {
		m.RunnerID, m.RunnerName = rn.id, rn.name
	}
	if typ == jobCompleted {
		m.FinishTime = j.CompletedAt.UTC()
		m.Result = cmp.Or(serviceResults[j.Conclusion], j.Conclusion)
	}
	return m
}

// runnerReferenceJSON is the Actions service's RunnerReference.
type runnerReferenceJSON struct {
	ID               int64  `json:"id"`
	Name             string `json:"name"`
	RunnerScaleSetID int64  `json:"runnerScaleSetId"`
}

func refOf(rn *runner) runnerReferenceJSON {
	return runnerReferenceJSON{ID: rn.id, Name: rn.name, RunnerScaleSetID: rn.scaleSetID}
}

// svcGenerateJIT creates an ephemeral runner of the set, carrying the set's labels and group,
// and answers its JIT configuration in the form the runner protocol's jit/connect decodes.
func (s *Server) svcGenerateJIT(r *http.Request, scope Scope, body []byte) (int, any, *serviceError) {
	var in struct {
		Name       string `json:"name"`
		WorkFolder string `json:"workFolder"`
	}
	if err := json.Unmarshal(body, &in); err != nil || strings.TrimSpace(in.Name) == "" {
		return 0, nil, svcErr(http.StatusBadRequest, excInvalidRequest, "The runner's name is required.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	if s.runnerByName(scope, in.Name) != nil {
		return 0, nil, svcErr(http.StatusConflict, excAgentExists, "A runner named %s already exists.", in.Name)
	}
	rn := s.newRunner(&runner{
		name: in.Name, scope: scope, labels: ss.labelNames(), group: ss.group,
		ephemeral: true, jit: true, scaleSetID: ss.id,
	})
	encoded, err := s.encodeJITConfig(rn, in.WorkFolder)
	if err != nil {
		s.removeRunner(rn)
		return 0, nil, svcErr(http.StatusInternalServerError, excInvalidRequest, "encoding the JIT configuration failed")
	}
	s.recordSecret(encoded)
	return http.StatusOK, map[string]any{"runner": refOf(rn), "encodedJITConfig": encoded}, nil
}

// runnerOf resolves {runner_id} to a runner of the admin token's scope. Callers hold s.mu.
func (s *Server) runnerOf(r *http.Request, scope Scope) (*runner, *serviceError) {
	id, err := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	rn := s.st.runners[id]
	if err != nil || rn == nil || rn.scope.key() != scope.key() {
		return nil, svcErr(http.StatusNotFound, excAgentNotFound, "Runner %s not found.", r.PathValue("runner_id"))
	}
	return rn, nil
}

// wasRunnerOf reports whether {runner_id} names a runner of the scope's sets that is gone.
// Callers hold s.mu.
func (s *Server) wasRunnerOf(r *http.Request, scope Scope) bool {
	id, err := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	key, ok := s.st.goneRunners[id]
	return err == nil && ok && key == scope.key()
}

func (s *Server) svcGetRunner(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, serr := s.runnerOf(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	return http.StatusOK, refOf(rn), nil
}

func (s *Server) svcFindRunner(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []runnerReferenceJSON{}
	if name := r.URL.Query().Get("agentName"); name != "" {
		if rn := s.runnerByName(scope, name); rn != nil {
			out = append(out, refOf(rn))
		}
	}
	return serviceList(out)
}

// svcRemoveRunner removes a runner; one running a job is refused, as REST refuses with 422.
func (s *Server) svcRemoveRunner(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, serr := s.runnerOf(r, scope)
	if serr != nil {
		if s.cfg.ScaleSetRemovalOfGoneRunners && s.wasRunnerOf(r, scope) {
			return http.StatusNoContent, nil, nil
		}
		return 0, nil, serr
	}
	if rn.jobID != 0 {
		return 0, nil, svcErr(http.StatusBadRequest, excJobStillRunning,
			"Runner %s is still running job %d and cannot be removed.", rn.name, rn.jobID)
	}
	s.removeRunner(rn)
	return http.StatusNoContent, nil, nil
}

// SetScaleSetBacklogLimit changes Config.ScaleSetBacklogLimit of a running double (0 keeps
// every job message).
func (s *Server) SetScaleSetBacklogLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.ScaleSetBacklogLimit = max(limit, 0)
}
