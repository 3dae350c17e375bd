package githubdouble

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"
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

// runsOfRepo returns the repository's runs, newest first, each as its first job with the
// run's status and conclusion in place of the job's (runStatus), kept by the filter. Callers
// hold s.mu.
func (s *Server) runsOfRepo(repoKey string, keep func(*job) bool) []*job {
	byRun := map[int64][]*job{}
	for _, j := range s.jobsOfRepo(repoKey, func(*job) bool { return true }) {
		byRun[j.RunID] = append(byRun[j.RunID], j)
	}
	var out []*job
	for _, jobs := range byRun {
		run := *jobs[len(jobs)-1] // the run's first job (jobs are newest first)
		run.Status, run.Conclusion = runStatus(jobs)
		for _, j := range jobs {
			run.CompletedAt = maxTime(run.CompletedAt, j.CompletedAt)
			run.StartedAt = minTime(run.StartedAt, j.StartedAt)
		}
		if keep(&run) {
			out = append(out, &run)
		}
	}
	slices.SortFunc(out, func(a, b *job) int { return cmp.Compare(b.RunID, a.RunID) })
	return out
}

// runStatus is a run's status from its jobs: queued while every job is, completed once every
// job is (failure, then cancelled, outranking success), in progress otherwise.
func runStatus(jobs []*job) (status, conclusion string) {
	if len(jobs) == 1 {
		return jobs[0].Status, jobs[0].Conclusion
	}
	queued, completed := 0, 0
	conclusion = ConclusionSuccess
	for _, j := range jobs {
		switch j.Status {
		case StatusQueued:
			queued++
		case StatusCompleted:
			completed++
			if j.Conclusion == ConclusionFailure || (j.Conclusion == ConclusionCancelled && conclusion != ConclusionFailure) {
				conclusion = j.Conclusion
			}
		}
	}
	switch {
	case queued == len(jobs):
		return StatusQueued, ""
	case completed == len(jobs):
		return StatusCompleted, conclusion
	}
	return StatusInProgress, ""
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if !b.IsZero() && b.Before(a) {
		return b
	}
	return a
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
	runs := s.runsOfRepo(lower(repo.fullName()), statusFilter(r))
	page := paginate(r, len(runs))
	out := make([]map[string]any, 0, page.end-page.start)
	for _, run := range runs[page.start:page.end] {
		out = append(out, s.renderRun(run, repo))
	}
	page.setLink(w, r)
	s.writeConditional(w, r, struct {
		TotalCount   int              `json:"total_count"`
		WorkflowRuns []map[string]any `json:"workflow_runs"`
	}{len(runs), out})
}

// handleGetRun serves GET /repos/{owner}/{repo}/actions/runs/{run_id}: one run of the
// repository, as the listing renders it (with its workflow file's path); 404 for none.
func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, runID, ok := s.repoAndRun(w, r)
	if !ok {
		return
	}
	runs := s.runsOfRepo(lower(repo.fullName()), func(j *job) bool { return j.RunID == runID })
	if len(runs) == 0 {
		writeError(w, http.StatusNotFound, "Not Found", docsRuns)
		return
	}
	s.writeConditional(w, r, s.renderRun(runs[0], repo))
}

func (s *Server) handleListJobs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, runID, ok := s.repoAndRun(w, r)
	if !ok {
		return
	}
	byStatus := statusFilter(r)
	jobs := s.jobsOfRepo(lower(repo.fullName()), func(j *job) bool { return j.RunID == runID && byStatus(j) })
	slices.Reverse(jobs) // a run lists its jobs in the order they were made
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

// repoAndRun reads a runs route's repository and run id; for an unknown repository or an id
// that is not a number it answers 404, as GitHub does, and reports false. Called with s.mu held.
func (s *Server) repoAndRun(w http.ResponseWriter, r *http.Request) (*repository, int64, bool) {
	repo, ok := s.st.repos[lower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	runID, err := strconv.ParseInt(r.PathValue("run_id"), 10, 64)
	if !ok || err != nil {
		writeError(w, http.StatusNotFound, "Not Found", docsRuns)
		return nil, 0, false
	}
	return repo, runID, true
}
