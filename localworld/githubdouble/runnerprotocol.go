package githubdouble

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The runner protocol is not GitHub's public API: it stands in for the private protocol the
// actions runner speaks (session, job acquisition, completion). It is JSON under /_runner/,
// has no rate limit, and is counted apart from API calls.

// maxAcquireWait caps a long poll, as the runner's own poll is capped.
const maxAcquireWait = 60 * time.Second

type sessionJSON struct {
	RunnerID  int64  `json:"runner_id"`
	Name      string `json:"name"`
	Ephemeral bool   `json:"ephemeral"`
	Session   string `json:"session"`
}

type assignedJobJSON struct {
	ID         int64    `json:"id"`
	RunID      int64    `json:"run_id"`
	Repository string   `json:"repository"`
	Labels     []string `json:"labels"`
}

type registerJSON struct {
	Token       string   `json:"token"`
	Name        string   `json:"name"`
	Labels      []string `json:"labels"`
	RunnerGroup string   `json:"runner_group"`
	Ephemeral   bool     `json:"ephemeral"`
}

// protocolError is an answer of the runner protocol other than success.
type protocolError struct {
	status  int
	message string
}

func (e *protocolError) Error() string { return e.message }

func protoErr(status int, format string, args ...any) *protocolError {
	return &protocolError{status: status, message: fmt.Sprintf(format, args...)}
}

func (s *Server) registerRunnerProtocol(mux *http.ServeMux) {
	s.handleProtocol(mux, "POST /_runner/jit/connect", s.protoConnectJIT)
	s.handleProtocol(mux, "POST /_runner/register", s.protoRegister)
	s.handleProtocol(mux, "POST /_runner/connect", s.protoConnect)
	s.handleProtocol(mux, "POST /_runner/acquire", s.protoAcquire)
	s.handleProtocol(mux, "POST /_runner/jobs/{job_id}/complete", s.protoComplete)
	s.handleProtocol(mux, "POST /_runner/disconnect", s.protoDisconnect)
}

// protoHandler handles one runner-protocol call: it returns the status and body to answer, or
// an error.
type protoHandler func(r *http.Request, body []byte) (int, any, *protocolError)

func (s *Server) handleProtocol(mux *http.ServeMux, pattern string, h protoHandler) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		status, out, perr := http.StatusBadRequest, any(nil), (*protocolError)(nil)
		defer func() { s.countProtocol(pattern, status) }()
		body, err := readBody(r)
		if err != nil {
			perr = protoErr(http.StatusBadRequest, "reading body: %v", err)
		} else {
			status, out, perr = h(r, body)
		}
		if perr != nil {
			status = perr.status
			writeJSON(w, status, map[string]string{"message": perr.message})
			return
		}
		if out == nil {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, out)
	})
}

func decodeProto(body []byte, into any) *protocolError {
	if err := json.Unmarshal(body, into); err != nil {
		return protoErr(http.StatusBadRequest, "body is not valid JSON: %v", err)
	}
	return nil
}

// sessionRunner finds the runner a session credential belongs to. Callers hold s.mu.
func (s *Server) sessionRunner(r *http.Request) (*runner, *protocolError) {
	cred := bearer(r)
	id, ok := s.st.credentials[cred]
	if cred == "" || !ok {
		return nil, protoErr(http.StatusUnauthorized, "runner credential is unknown or its runner was removed")
	}
	return s.st.runners[id], nil
}

func (s *Server) protoConnectJIT(_ *http.Request, body []byte) (int, any, *protocolError) {
	var in struct {
		EncodedJITConfig string `json:"encoded_jit_config"`
	}
	if perr := decodeProto(body, &in); perr != nil {
		return 0, nil, perr
	}
	cfg, err := decodeJITConfig(in.EncodedJITConfig)
	if err != nil {
		return 0, nil, protoErr(http.StatusUnauthorized, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.st.credentials[cfg.Credential]
	if !ok {
		return 0, nil, protoErr(http.StatusUnauthorized, "JIT configuration is unknown or its runner was removed")
	}
	rn := s.st.runners[id]
	if perr := s.bringOnline(rn); perr != nil {
		return 0, nil, perr
	}
	return http.StatusOK, sessionJSON{RunnerID: rn.id, Name: rn.name, Ephemeral: rn.ephemeral, Session: rn.credential}, nil
}

// bringOnline starts a runner's session; a second session is refused as GitHub refuses it.
// Callers hold s.mu.
func (s *Server) bringOnline(rn *runner) *protocolError {
	if rn.online {
		return protoErr(http.StatusConflict, "A session for this runner already exists.")
	}
	rn.online, rn.connected = true, true
	return nil
}

func (s *Server) protoRegister(_ *http.Request, body []byte) (int, any, *protocolError) {
	var in registerJSON
	if perr := decodeProto(body, &in); perr != nil {
		return 0, nil, perr
	}
	if strings.TrimSpace(in.Name) == "" {
		return 0, nil, protoErr(http.StatusBadRequest, "runner name is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.st.regTokens[in.Token]
	if !ok || !s.now().Before(tok.expires) {
		return 0, nil, protoErr(http.StatusUnauthorized, "registration token is unknown or expired")
	}
	group, ok := s.groupByName(tok.scope, in.RunnerGroup)
	if !ok {
		return 0, nil, protoErr(http.StatusNotFound, "runner group %q not found in %s", in.RunnerGroup, tok.scope)
	}
	if old := s.runnerByName(tok.scope, in.Name); old != nil {
		if old.online {
			return 0, nil, protoErr(http.StatusConflict, "a runner named %q is online in %s", in.Name, tok.scope)
		}
		s.removeRunner(old) // config.sh --replace
	}
	labels := []string{"self-hosted", "Linux", "X64"}
	for _, l := range in.Labels {
		if l = strings.TrimSpace(l); l != "" && !slices.ContainsFunc(labels, func(have string) bool { return strings.EqualFold(have, l) }) {
			labels = append(labels, l)
		}
	}
	rn := s.newRunner(&runner{name: in.Name, scope: tok.scope, labels: labels, group: group, ephemeral: in.Ephemeral})
	return http.StatusCreated, sessionJSON{RunnerID: rn.id, Name: rn.name, Ephemeral: rn.ephemeral, Session: rn.credential}, nil
}

func (s *Server) protoConnect(r *http.Request, _ []byte) (int, any, *protocolError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, perr := s.sessionRunner(r)
	if perr != nil {
		return 0, nil, perr
	}
	if perr := s.bringOnline(rn); perr != nil {
		return 0, nil, perr
	}
	s.st.wakeWaiters()
	return http.StatusNoContent, nil, nil
}

func (s *Server) protoAcquire(r *http.Request, body []byte) (int, any, *protocolError) {
	var in struct {
		WaitMillis int64 `json:"wait_ms"`
	}
	if perr := decodeProto(body, &in); perr != nil {
		return 0, nil, perr
	}
	wait := min(max(time.Duration(in.WaitMillis)*time.Millisecond, 0), maxAcquireWait)
	j, perr := s.acquire(r.Context(), bearer(r), wait)
	if perr != nil {
		return 0, nil, perr
	}
	if j == nil {
		return http.StatusNoContent, nil, nil
	}
	return http.StatusOK, j, nil
}

// acquire long-polls for work: it returns the runner's job in progress, or assigns it the
// oldest queued job it can take, or waits until one is queued or the wait ends.
func (s *Server) acquire(ctx context.Context, cred string, wait time.Duration) (*assignedJobJSON, *protocolError) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		id, ok := s.st.credentials[cred]
		if cred == "" || !ok {
			s.mu.Unlock()
			return nil, protoErr(http.StatusUnauthorized, "runner credential is unknown or its runner was removed")
		}
		rn := s.st.runners[id]
		if !rn.online {
			s.mu.Unlock()
			return nil, protoErr(http.StatusConflict, "runner %q is not connected", rn.name)
		}
		j := s.st.jobs[rn.jobID]
		if j == nil {
			s.lapseAssignments()
			j = s.assignNext(rn)
		}
		wake := s.st.wake
		s.mu.Unlock()
		if j != nil {
			return &assignedJobJSON{ID: j.ID, RunID: j.RunID, Repository: j.Repository, Labels: slices.Clone(j.Labels)}, nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		case <-s.done:
			return nil, nil
		}
	}
}

func (s *Server) protoComplete(r *http.Request, body []byte) (int, any, *protocolError) {
	var in struct {
		Conclusion string `json:"conclusion"`
	}
	if perr := decodeProto(body, &in); perr != nil {
		return 0, nil, perr
	}
	if !slices.Contains(validConclusions, in.Conclusion) {
		return 0, nil, protoErr(http.StatusBadRequest, "conclusion %q is not one of %v", in.Conclusion, validConclusions)
	}
	jobID, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	if err != nil {
		return 0, nil, protoErr(http.StatusNotFound, "job %q not found", r.PathValue("job_id"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, perr := s.sessionRunner(r)
	if perr != nil {
		return 0, nil, perr
	}
	j, ok := s.st.jobs[jobID]
	switch {
	case !ok:
		return 0, nil, protoErr(http.StatusNotFound, "job %d not found", jobID)
	case j.RunnerID != rn.id:
		return 0, nil, protoErr(http.StatusConflict, "job %d is not assigned to runner %q", jobID, rn.name)
	case j.Status != StatusInProgress:
		return 0, nil, protoErr(http.StatusConflict, "job %d is %s, not in progress", jobID, j.Status)
	}
	conclusion := in.Conclusion
	if conclusion == ConclusionSuccess && j.conclusion != "" {
		conclusion = j.conclusion // the job's steps failed, whatever the runner made of them
	}
	s.completeJob(j, conclusion)
	return http.StatusNoContent, nil, nil
}

func (s *Server) protoDisconnect(r *http.Request, _ []byte) (int, any, *protocolError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, perr := s.sessionRunner(r)
	if perr != nil {
		return 0, nil, perr
	}
	rn.online = false
	if j, ok := s.st.jobs[rn.jobID]; ok {
		// GitHub fails the job of a runner it lost.
		s.completeJob(j, ConclusionFailure)
	}
	s.st.wakeWaiters()
	return http.StatusNoContent, nil, nil
}
