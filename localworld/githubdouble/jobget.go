package githubdouble

import (
	"net/http"
	"strconv"
)

const docsJobs = "https://docs.github.com/rest/actions/workflow-jobs#get-a-job-for-a-workflow-run"

// handleGetJob serves GET /repos/{owner}/{repo}/actions/jobs/{job_id}: one job of the
// repository, as GitHub renders it; 404 for a job of another repository or none.
func (s *Server) handleGetJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	id, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	if !ok || err != nil {
		writeError(w, http.StatusNotFound, "Not Found", docsJobs)
		return
	}
	j, ok := s.st.jobs[id]
	if !ok || j.repoKey != lower(repo.fullName()) {
		writeError(w, http.StatusNotFound, "Not Found", docsJobs)
		return
	}
	writeJSON(w, http.StatusOK, s.renderJob(j))
}
