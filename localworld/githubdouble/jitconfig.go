package githubdouble

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// jitRequest is the body of generate-jitconfig once it passed validation.
type jitRequest struct {
	name       string
	groupID    int64
	labels     []string
	workFolder string
}

// parseJITRequest validates a generate-jitconfig body against GitHub's schema: name (string),
// runner_group_id (integer) and labels (1 to 100 strings) are required, work_folder is an
// optional string. It returns a description of the first problem, as GitHub's 422 does.
func parseJITRequest(body []byte) (jitRequest, string) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return jitRequest{}, "The request body is not a JSON object."
	}
	var req jitRequest
	if problem := requiredField(fields, "name", "string", &req.name); problem != "" {
		return req, problem
	}
	if strings.TrimSpace(req.name) == "" {
		return req, "For 'properties/name', \"\" is too short."
	}
	if problem := requiredField(fields, "runner_group_id", "integer", &req.groupID); problem != "" {
		return req, problem
	}
	if problem := requiredField(fields, "labels", "array", &req.labels); problem != "" {
		return req, problem
	}
	switch {
	case len(req.labels) < 1:
		return req, "For 'properties/labels', [] has fewer than 1 items."
	case len(req.labels) > 100:
		return req, fmt.Sprintf("For 'properties/labels', %d items is more than 100.", len(req.labels))
	}
	for _, l := range req.labels {
		if strings.TrimSpace(l) == "" {
			return req, "For 'items', \"\" is not a valid label name."
		}
	}
	if raw, ok := fields["work_folder"]; ok {
		if err := json.Unmarshal(raw, &req.workFolder); err != nil || bytes.Equal(raw, []byte("null")) {
			return req, fmt.Sprintf("For 'properties/work_folder', %s is not a string.", raw)
		}
	}
	return req, ""
}

// requiredField decodes a required field strictly: missing, null or of the wrong JSON type is a
// problem, described as GitHub describes it.
func requiredField(fields map[string]json.RawMessage, name, typ string, into any) string {
	raw, ok := fields[name]
	if !ok {
		return fmt.Sprintf("%q wasn't supplied.", name)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return fmt.Sprintf("For 'properties/%s', nil is not %s %s.", name, article(typ), typ)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Sprintf("For 'properties/%s', %s is not %s %s.", name, raw, article(typ), typ)
	}
	return ""
}

func article(typ string) string {
	if strings.IndexByte("aeiou", typ[0]) >= 0 {
		return "an"
	}
	return "a"
}

// jitConfig is the document an encoded JIT configuration carries. Like GitHub's, it holds the
// runner's credential, so it is as secret as a token.
type jitConfig struct {
	RunnerID   int64  `json:"runner_id"`
	Name       string `json:"name"`
	Scope      string `json:"scope"`
	ServerURL  string `json:"server_url"`
	WorkFolder string `json:"work_folder"`
	Credential string `json:"credential"`
}

func (s *Server) handleGenerateJITConfig(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", docsRunners)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	scope, ok := s.canonicalScope(scopeOf(r))
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsRunners)
		return
	}
	req, problem := parseJITRequest(body)
	if problem != "" {
		writeValidationError(w, problem, docsRunners)
		return
	}
	group, ok := s.group(scope, req.groupID)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Runner group %d not found", req.groupID), docsRunners)
		return
	}
	if s.runnerByName(scope, req.name) != nil {
		writeError(w, http.StatusConflict,
			fmt.Sprintf("Already exists - A runner with the name %s already exists.", req.name), docsRunners)
		return
	}
	rn := s.newRunner(&runner{name: req.name, scope: scope, labels: req.labels, group: group, ephemeral: true, jit: true})
	encoded, err := s.encodeJITConfig(rn, req.workFolder)
	if err != nil {
		s.removeRunner(rn)
		writeError(w, http.StatusInternalServerError, "encoding JIT configuration failed", docsRunners)
		return
	}
	s.recordSecret(encoded)
	writeJSON(w, http.StatusCreated, struct {
		Runner           runnerJSON `json:"runner"`
		EncodedJITConfig string     `json:"encoded_jit_config"`
	}{s.renderRunner(rn), encoded})
}

// encodeJITConfig renders the base64 configuration the runner is started with.
func (s *Server) encodeJITConfig(rn *runner, workFolder string) (string, error) {
	if workFolder == "" {
		workFolder = "_work"
	}
	doc, err := json.Marshal(jitConfig{
		RunnerID: rn.id, Name: rn.name, Scope: rn.scope.String(), ServerURL: s.baseURL,
		WorkFolder: workFolder, Credential: rn.credential,
	})
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(doc), nil
}

// decodeJITConfig reads the credential out of an encoded JIT configuration.
func decodeJITConfig(encoded string) (jitConfig, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return jitConfig{}, fmt.Errorf("JIT configuration is not base64")
	}
	var cfg jitConfig
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Credential == "" {
		return jitConfig{}, fmt.Errorf("JIT configuration is not one the double issued")
	}
	return cfg, nil
}
