package githubdouble

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/runnerflow/runnerflow/internal/jobgraph"
)

// A run is a workflow file at a commit of a repository, read with the same parser runnerflow
// uses (internal/jobgraph). StartRun queues the jobs that need nothing; each later job is
// queued once every job it needs has completed successfully, and is skipped (completed with
// conclusion "skipped", no runner) when one of them did not, as GitHub skips the dependants of
// a failed job. A matrix job is one job per combination; a job it needs is done when all of
// them are. What the runner reports decides a job's conclusion, unless RunSpec.Conclusions
// names the job: a runner reporting success then records that conclusion instead, so a test
// can make a job fail without a runner of its own.

// RunSpec starts a run of a workflow file.
type RunSpec struct {
	// Repository is "owner/repo" of a repository added with AddRepository.
	Repository string
	// Path is the workflow file's path in the repository, e.g. ".github/workflows/ci.yml".
	Path string
	// Ref is the commit (a full SHA) or branch the file is read at; empty means the default
	// branch. The run's head_sha is the commit's.
	Ref string
	// Conclusions are the conclusions the named jobs come to (by job id, case-insensitively;
	// every job of a matrix); a job not named concludes as its runner reports.
	Conclusions map[string]string
}

// Run is a snapshot of a run started with StartRun.
type Run struct {
	ID int64
	// Workflow is the file's name, or its path when it names none, as GitHub shows it.
	Workflow string
	Path     string
	HeadSHA  string
	// Jobs are the run's jobs so far, in the order they were made; a job waiting for its
	// needs has none yet.
	Jobs []Job
	// ByJob are the jobs made so far by the id of the file's job they come from: a matrix
	// job's combinations in order.
	ByJob map[string][]Job
	// Waiting are the ids of the file's jobs not yet queued or skipped.
	Waiting []string
}

// run is a started run and the file's jobs that wait for their needs.
type run struct {
	id          int64
	repo        *repository
	graph       *jobgraph.Graph
	path, sha   string
	branch      string
	conclusions map[string]string  // by lower-cased job id
	made        map[string][]int64 // the jobs made of each of the file's jobs, by lower-cased id
}

// StartRun reads the workflow file at the ref, starts a run of it and queues its jobs that
// need nothing. The file must parse (jobgraph.Parse) and each job's labels and matrix size
// must be known without running it (no ${{ }} in runs-on or the matrix).
func (s *Server) StartRun(spec RunSpec) (Run, error) {
	for id, conclusion := range spec.Conclusions {
		if !slices.Contains(validConclusions, conclusion) {
			return Run{}, fmt.Errorf("githubdouble: conclusion %q of job %q is not one of %v", conclusion, id, validConclusions)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(spec.Repository)]
	if !ok {
		return Run{}, fmt.Errorf("githubdouble: unknown repository %q", spec.Repository)
	}
	c, err := repo.resolve(spec.Ref)
	if err != nil {
		return Run{}, fmt.Errorf("githubdouble: %s: %w", spec.Repository, err)
	}
	src, ok := c.files[spec.Path]
	if !ok {
		return Run{}, fmt.Errorf("githubdouble: %s has no file %q at %s", spec.Repository, spec.Path, c.sha)
	}
	g, err := runnableGraph(src)
	if err != nil {
		return Run{}, fmt.Errorf("githubdouble: %s: %w", spec.Path, err)
	}
	for id := range spec.Conclusions {
		if _, ok := g.Job(id); !ok {
			return Run{}, fmt.Errorf("githubdouble: %s has no job %q to conclude", spec.Path, id)
		}
	}
	rn := &run{
		id: s.st.next("run"), repo: repo, graph: g, path: spec.Path, sha: c.sha,
		branch:      cmp.Or(branchOf(repo, spec.Ref, c.sha), defaultBranch),
		conclusions: map[string]string{}, made: map[string][]int64{},
	}
	for id, conclusion := range spec.Conclusions {
		rn.conclusions[lower(id)] = conclusion
	}
	s.st.runs[rn.id] = rn
	s.advanceRun(rn)
	return s.runSnapshot(rn), nil
}

// runnableGraph parses a file the double can run: labels and matrix sizes known.
func runnableGraph(src []byte) (*jobgraph.Graph, error) {
	g, err := jobgraph.Parse(src)
	if err != nil {
		return nil, err
	}
	for _, j := range g.Jobs {
		switch {
		case !j.LabelsKnown() || len(j.Labels) == 0:
			return nil, fmt.Errorf("job %q: the double runs only jobs whose runs-on labels are written out", j.ID)
		case j.Matrix.Unknown || j.Matrix.Size < 1 || j.Matrix.Size > MaxMatrixJobs:
			return nil, fmt.Errorf("job %q: the double runs only static matrices of 1 to %d jobs", j.ID, MaxMatrixJobs)
		}
	}
	return g, nil
}

// branchOf names the branch a run is for: the ref when it is a branch, else a branch whose
// head is the commit, else none.
func branchOf(repo *repository, ref, sha string) string {
	if _, ok := repo.branches[ref]; ok {
		return ref
	}
	for _, b := range slices.Sorted(maps.Keys(repo.branches)) {
		if repo.branches[b] == sha {
			return b
		}
	}
	return ""
}

// advanceRun queues each waiting job whose needs all succeeded and skips each whose needs
// are done with one not successful, until nothing changes. Callers hold s.mu.
func (s *Server) advanceRun(rn *run) {
	queued := false
	for changed := true; changed; {
		changed = false
		for _, j := range rn.graph.Jobs {
			if _, made := rn.made[lower(j.ID)]; made {
				continue
			}
			done, ok := rn.needsState(s, j)
			switch {
			case !done:
				continue
			case ok:
				s.queueGraphJob(rn, j)
				queued = true
			default:
				s.skipGraphJob(rn, j)
			}
			changed = true
		}
	}
	if queued {
		s.st.wakeWaiters()
	}
}

// needsState reports whether every job j needs has completed, and whether all succeeded.
// Callers hold s.mu.
func (rn *run) needsState(s *Server, j jobgraph.Job) (done, succeeded bool) {
	succeeded = true
	for _, n := range j.Needs {
		ids, made := rn.made[lower(n)]
		if !made {
			return false, false
		}
		for _, id := range ids {
			dep := s.st.jobs[id]
			if dep.Status != StatusCompleted {
				return false, false
			}
			succeeded = succeeded && dep.Conclusion == ConclusionSuccess
		}
	}
	return true, succeeded
}

// queueGraphJob queues a job of the file, one per matrix combination. Callers hold s.mu.
func (s *Server) queueGraphJob(rn *run, gj jobgraph.Job) {
	for i := range gj.Matrix.Size {
		j := s.queueRunJob(rn.repo, rn.id, JobSpec{
			Labels: gj.LabelValues(), Workflow: rn.workflowName(), Name: matrixJobName(gj, i), HeadBranch: rn.branch,
			WorkflowPath: rn.path,
		}, rn.sha)
		j.conclusion = rn.conclusions[lower(gj.ID)]
		rn.made[lower(gj.ID)] = append(rn.made[lower(gj.ID)], j.ID)
	}
}

// skipGraphJob records a job of the file as skipped: completed without a runner. Callers
// hold s.mu.
func (s *Server) skipGraphJob(rn *run, gj jobgraph.Job) {
	now := s.now()
	for i := range gj.Matrix.Size {
		j := &job{Job: Job{
			ID: s.st.next("job"), RunID: rn.id, Repository: rn.repo.fullName(), Labels: gj.LabelValues(),
			Workflow: rn.workflowName(), Name: matrixJobName(gj, i), HeadBranch: rn.branch, HeadSHA: rn.sha,
			Status: StatusCompleted, Conclusion: ConclusionSkipped, CreatedAt: now, StartedAt: now, CompletedAt: now,
		}, repoKey: lower(rn.repo.fullName()), path: rn.path}
		s.st.jobs[j.ID] = j
		rn.made[lower(gj.ID)] = append(rn.made[lower(gj.ID)], j.ID)
		s.log.Debug("job skipped", "jobID", j.ID, "runID", rn.id, "name", j.Name)
		s.emitJobEvent(j, "completed")
	}
}

// matrixJobName names the i-th job of a matrix "name (i+1)"; a job without a matrix keeps
// its name. (GitHub names a combination by its values; the double numbers them.)
func matrixJobName(gj jobgraph.Job, i int) string {
	if gj.Matrix.Size == 1 {
		return gj.Name
	}
	return fmt.Sprintf("%s (%d)", gj.Name, i+1)
}

// workflowName is the file's name, or its path when it has none, as GitHub shows it.
func (rn *run) workflowName() string { return cmp.Or(rn.graph.Name, rn.path) }

// jobCompleted moves a run on once one of its jobs completed: its dependants are queued or
// skipped at once, so a run whose made jobs have all completed has none waiting, and the
// run's status (runStatus) needs no knowledge of the file. Callers hold s.mu.
func (s *Server) jobCompleted(j *job) {
	if rn, ok := s.st.runs[j.RunID]; ok {
		s.advanceRun(rn)
	}
}

// Run returns a snapshot of a run started with StartRun.
func (s *Server) Run(id int64) (Run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, ok := s.st.runs[id]
	if !ok {
		return Run{}, false
	}
	return s.runSnapshot(rn), true
}

// Done reports whether the run is over: no job of the file waits for its needs and every job
// made has completed.
func (r Run) Done() bool {
	if len(r.Waiting) > 0 {
		return false
	}
	for _, j := range r.Jobs {
		if j.Status != StatusCompleted {
			return false
		}
	}
	return true
}

// RunsDone reports whether every one of the runs is over (Run.Done); an unknown run is not.
func (s *Server) RunsDone(ids ...int64) bool {
	for _, id := range ids {
		if r, ok := s.Run(id); !ok || !r.Done() {
			return false
		}
	}
	return true
}

// runSnapshot copies a run for tests. Callers hold s.mu.
func (s *Server) runSnapshot(rn *run) Run {
	out := Run{ID: rn.id, Workflow: rn.workflowName(), Path: rn.path, HeadSHA: rn.sha, ByJob: map[string][]Job{}}
	for _, gj := range rn.graph.Jobs {
		ids, made := rn.made[lower(gj.ID)]
		if !made {
			out.Waiting = append(out.Waiting, gj.ID)
		}
		for _, id := range ids {
			j := s.st.jobs[id].snapshot()
			out.Jobs = append(out.Jobs, j)
			out.ByJob[gj.ID] = append(out.ByJob[gj.ID], j)
		}
	}
	slices.SortFunc(out.Jobs, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
