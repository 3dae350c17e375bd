package githubdouble

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Job acquisition, the Actions service's flow on GitHub Enterprise Server (actions/scaleset #75)
// and for ARC v0.27.6's listener, in a set that is offered its jobs (Config.ScaleSetJobOffers,
// Config.ScaleSetJobOffersFor): the listener acquires the jobs it was offered with its
// message-queue token, and each job it gets is assigned to its set and announced as
// JobAssigned. A job already acquired, finished, cancelled or not offered to the set is left
// out of the answer, not refused.

func (s *Server) registerJobAcquisition(mux *http.ServeMux) {
	s.handleQueue(mux, "POST "+scaleSetsRoute+"/{scale_set_id}/acquirejobs", s.queueAcquireJobs)
	s.handleService(mux, "GET "+scaleSetsRoute+"/{scale_set_id}/acquirablejobs", s.svcAcquirableJobs)
}

// acquirableJobJSON is a job a set was offered and may still acquire. A new listener lists
// them when its session starts, since the messages that offered them went to an earlier one.
type acquirableJobJSON struct {
	AcquireJobURL   string   `json:"acquireJobUrl"`
	MessageType     string   `json:"messageType"`
	RunnerRequestID int64    `json:"runnerRequestId"`
	RepositoryName  string   `json:"repositoryName"`
	OwnerName       string   `json:"ownerName"`
	JobWorkflowRef  string   `json:"jobWorkflowRef"`
	EventName       string   `json:"eventName"`
	RequestLabels   []string `json:"requestLabels"`
}

// svcAcquirableJobs lists the set's offered jobs, oldest first; with none it answers 204 and
// no body, which ARC's own client reads as an empty list (github/actions/client.go,
// GetAcquirableJobs).
func (s *Server) svcAcquirableJobs(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	out := []acquirableJobJSON{}
	for _, id := range s.st.queued {
		j := s.st.jobs[id]
		if !ss.jobs[id] || !j.offered {
			continue
		}
		m := s.jobMessage(jobAvailable, j, nil)
		out = append(out, acquirableJobJSON{
			AcquireJobURL: s.baseURL + strings.TrimPrefix(scaleSetsRoute, "/") + "/" + strconv.FormatInt(ss.id, 10) + "/acquirejobs",
			MessageType:   jobAvailable, RunnerRequestID: j.ID, RepositoryName: m.RepositoryName, OwnerName: m.OwnerName,
			JobWorkflowRef: m.JobWorkflowRef, EventName: m.EventName, RequestLabels: m.RequestLabels,
		})
	}
	if len(out) == 0 {
		return http.StatusNoContent, nil, nil
	}
	return serviceList(out)
}

// int64ListJSON is the Actions service's list of ids.
type int64ListJSON struct {
	Count int     `json:"count"`
	Value []int64 `json:"value"`
}

// queueAcquireJobs assigns the offered jobs among the request ids to the set, as many as it has
// room for, and answers the ids it acquired; the others stay offered.
func (s *Server) queueAcquireJobs(r *http.Request) (int, any, *serviceError) {
	if r.URL.Query().Get("api-version") == "" {
		return 0, nil, svcErr(http.StatusBadRequest, excInvalidRequest, "The api-version query parameter is required.")
	}
	body, err := readBody(r)
	var ids []int64
	if err == nil {
		err = json.Unmarshal(body, &ids)
	}
	if err != nil {
		return 0, nil, svcErr(http.StatusBadRequest, excInvalidRequest, "The body is not a list of request ids.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.acquiringSet(r)
	if serr != nil {
		return 0, nil, serr
	}
	out := int64ListJSON{Value: []int64{}}
	for _, id := range ids {
		j := s.st.jobs[id]
		if j == nil || !ss.jobs[id] || !j.offered || j.Status != StatusQueued || !s.hasRoom(ss) {
			continue
		}
		j.offered = false
		s.assign(j, s.now())
		s.pushJobMessage(ss, jobAssigned, j, nil)
		out.Value = append(out.Value, id)
	}
	out.Count = len(out.Value)
	s.st.wakeWaiters()
	return http.StatusOK, out, nil
}

// acquiringSet resolves the message-queue token of an acquisition to the set in its path: a
// token that is unknown, expired or of another set's session is 401, as on a poll. Callers
// hold s.mu.
func (s *Server) acquiringSet(r *http.Request) (*scaleSet, *serviceError) {
	unauthorized := svcErr(http.StatusUnauthorized, excUnauthorized, "The message queue token is unknown or expired.")
	qt, ok := s.st.queueTokens[bearer(r)]
	id, err := strconv.ParseInt(r.PathValue("scale_set_id"), 10, 64)
	if !ok || err != nil || qt.scaleSetID != id {
		return nil, unauthorized
	}
	if ss := s.liveTokenSet(qt); ss != nil {
		return ss, nil
	}
	return nil, unauthorized
}
