package githubdouble

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
)

const docsRuns = "https://docs.github.com/rest/actions/workflow-runs"

// jobsOfRepo returns the repository's jobs ordered by id, newest first as GitHub lists runs.
// Callers hold s.mu.
func (s *Server) jobsOfRepo(repoKey string, keep func(*job) bool) []*job {
	var out []*job
	for _, j := range s.st.jobs {
		if j.repoKey == repoKey && keep(j) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *job) int { return cmp.Compare(b.ID, a.ID) })
	return out
}

// statusFilter implements the "status" query parameter, which matches a status or a conclusion.
func statusFilter(r *http.Request) func(*job) bool {
	want := r.URL.Query().Get("status")
	return func(j *job) bool {
		return want == "" || j.Status == want || (j.Status == StatusCompleted && j.Conclusion == want)
	}
}

func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsRuns)
		return
	}
	jobs := s.jobsOfRepo(lower(repo.fullName()), statusFilter(r))
	page := paginate(r, len(jobs))
	runs := make([]map[string]any, 0, page.end-page.start)
	for _, j := range jobs[page.start:page.end] {
		runs = append(runs, s.renderRun(j, repo))
	}
	page.setLink(w, r)
	s.writeConditional(w, r, struct {
		TotalCount   int              `json:"total_count"`
		WorkflowRuns []map[string]any `json:"workflow_runs"`
	}{len(jobs), runs})
}

func (s *Server) handleListJobs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	runID, err := strconv.ParseInt(r.PathValue("run_id"), 10, 64)
	if !ok || err != nil {
		writeError(w, http.StatusNotFound, "Not Found", docsRuns)
		return
	}
	byStatus := statusFilter(r)
	jobs := s.jobsOfRepo(lower(repo.fullName()), func(j *job) bool { return j.RunID == runID && byStatus(j) })
	if len(jobs) == 0 && !s.runExists(lower(repo.fullName()), runID) {
		writeError(w, http.StatusNotFound, "Not Found", docsRuns)
		return
	}
	page := paginate(r, len(jobs))
	out := make([]jobJSON, 0, page.end-page.start)
	for _, j := range jobs[page.start:page.end] {
		out = append(out, s.renderJob(j))
	}
	page.setLink(w, r)
	s.writeConditional(w, r, struct {
		TotalCount int       `json:"total_count"`
		Jobs       []jobJSON `json:"jobs"`
	}{len(jobs), out})
}

// runExists reports whether a run of the repository exists. Callers hold s.mu.
func (s *Server) runExists(repoKey string, runID int64) bool {
	for _, j := range s.st.jobs {
		if j.repoKey == repoKey && j.RunID == runID {
			return true
		}
	}
	return false
}
