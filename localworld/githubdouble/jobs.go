package githubdouble

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// JobSpec describes a workflow job to queue: one workflow run with one job.
type JobSpec struct {
	// Repository is "owner/repo" of a repository added with AddRepository.
	Repository string
	// Labels is the job's runs-on, e.g. ["self-hosted", "linux"].
	Labels []string
	// Workflow is the workflow name; empty means "CI".
	Workflow string
	// Name is the job name; empty means "build".
	Name string
	// HeadBranch is the branch the run is for; empty means "main".
	HeadBranch string
	// HeadSHA is the commit the run is for, e.g. one PushFiles returned; empty means one made
	// up from the run's id.
	HeadSHA string
	// WorkflowPath is the run's workflow file; empty means one named after Workflow. With
	// HeadSHA it lets a test queue jobs of a file StartRun would refuse (one that does not
	// parse), as GitHub runs what runnerflow cannot read.
	WorkflowPath string
}

// Job statuses and the conclusions the double sets, as GitHub spells them.
const (
	StatusQueued             = "queued"
	StatusInProgress         = "in_progress"
	StatusCompleted          = "completed"
	ConclusionSuccess        = "success"
	ConclusionFailure        = "failure"
	ConclusionCancelled      = "cancelled"
	ConclusionSkipped        = "skipped"
	ConclusionNeutral        = "neutral"
	ConclusionTimedOut       = "timed_out"
	conclusionActionRequired = "action_required"
)

// validConclusions are the conclusions a runner may report.
var validConclusions = []string{ConclusionSuccess, ConclusionFailure, ConclusionCancelled,
	ConclusionSkipped, ConclusionNeutral, ConclusionTimedOut, conclusionActionRequired}

// Job is a snapshot of a workflow job for tests.
type Job struct {
	ID, RunID  int64
	Repository string
	Labels     []string
	Workflow   string
	Name       string
	HeadBranch string
	// HeadSHA is the commit the job's run is for.
	HeadSHA string
	// Status is queued, in_progress or completed.
	Status string
	// Conclusion is empty until the job completes.
	Conclusion      string
	RunnerID        int64
	RunnerName      string
	RunnerGroupID   int64
	RunnerGroupName string
	CreatedAt       time.Time
	StartedAt       time.Time
	CompletedAt     time.Time
	// Reassigned counts the times a scale set's assignment of the job lapsed with no runner of
	// the set taking it, and the service took it back (Config.ScaleSetReassignAfter).
	Reassigned int
}

type job struct {
	Job
	repoKey string
	// path is the run's workflow file; empty means one named after the workflow (runPath).
	path string
	// conclusion is what the job's steps come to (RunSpec.Conclusions): a runner reporting
	// success records it instead. Empty keeps what the runner reports.
	conclusion string
	// scaleSetID is the scale set the job was assigned to; only that set's runners take it.
	scaleSetID int64
	// offered marks a job its set was offered but has not acquired (a set that is offered its
	// jobs, Config.ScaleSetJobOffers): no runner takes it yet.
	offered bool
	// assignedAt is when its set was last assigned it for its runners
	// (Config.ScaleSetReassignAfter).
	assignedAt time.Time
}

// QueueJob creates a workflow run with one queued job and sends its "queued" webhook. The job
// waits until a runner that can see it acquires work.
func (s *Server) QueueJob(spec JobSpec) (Job, error) {
	jobs, err := s.QueueMatrix(spec, 1)
	if err != nil {
		return Job{}, err
	}
	return jobs[0], nil
}

// MaxMatrixJobs is GitHub's limit of the jobs a matrix generates in one workflow run.
const MaxMatrixJobs = 256

// QueueMatrix creates one workflow run with n queued jobs of the spec (a matrix: same labels,
// one run) and sends each job's "queued" webhook, in job order.
func (s *Server) QueueMatrix(spec JobSpec, n int) ([]Job, error) {
	switch {
	case len(spec.Labels) == 0:
		return nil, errors.New("githubdouble: a job needs at least one label")
	case n < 1 || n > MaxMatrixJobs:
		return nil, fmt.Errorf("githubdouble: a run has 1 to %d matrix jobs, not %d", MaxMatrixJobs, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(spec.Repository)]
	if !ok {
		return nil, fmt.Errorf("githubdouble: unknown repository %q", spec.Repository)
	}
	runID := s.st.next("run")
	out := make([]Job, 0, n)
	for range n {
		j := s.queueRunJob(repo, runID, spec, cmp.Or(spec.HeadSHA, fmt.Sprintf("%040x", runID)))
		out = append(out, j.Job)
	}
	s.st.wakeWaiters()
	return out, nil
}

// queueRunJob creates a queued job of a run, sends its "queued" webhook and offers it to the
// scale sets. Callers hold s.mu and wake the waiting runners afterwards.
func (s *Server) queueRunJob(repo *repository, runID int64, spec JobSpec, headSHA string) *job {
	now := s.now()
	j := &job{Job: Job{
		ID: s.st.next("job"), RunID: runID, Repository: repo.fullName(),
		Labels: slices.Clone(spec.Labels), Workflow: cmp.Or(spec.Workflow, "CI"), Name: cmp.Or(spec.Name, "build"),
		HeadBranch: cmp.Or(spec.HeadBranch, "main"), HeadSHA: headSHA, Status: StatusQueued,
		// GitHub sets started_at when the job is queued and again when a runner picks it up.
		CreatedAt: now, StartedAt: now,
	}, repoKey: lower(repo.fullName()), path: spec.WorkflowPath}
	s.st.jobs[j.ID] = j
	s.st.queued = append(s.st.queued, j.ID)
	s.log.Debug("job queued", "jobID", j.ID, "runID", runID, "repository", j.Repository, "labels", j.Labels)
	s.emitJobEvent(j, "queued")
	s.routeToScaleSet(j)
	return j
}

// CancelJob cancels a job: a queued job completes as cancelled without a runner; a job in
// progress completes as cancelled and frees (or, if ephemeral, removes) its runner.
func (s *Server) CancelJob(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.st.jobs[id]
	if !ok {
		return fmt.Errorf("githubdouble: unknown job %d", id)
	}
	if j.Status == StatusCompleted {
		return fmt.Errorf("githubdouble: job %d already completed", id)
	}
	s.completeJob(j, ConclusionCancelled)
	return nil
}

// Job returns a snapshot of one job.
func (s *Server) Job(id int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapseAssignments()
	j, ok := s.st.jobs[id]
	if !ok {
		return Job{}, false
	}
	return j.snapshot(), true
}

// Jobs returns every job, ordered by id.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapseAssignments()
	out := make([]Job, 0, len(s.st.jobs))
	for _, j := range s.st.jobs {
		out = append(out, j.snapshot())
	}
	slices.SortFunc(out, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (j *job) snapshot() Job {
	out := j.Job
	out.Labels = slices.Clone(j.Labels)
	return out
}

// canSee reports whether a runner's registration covers the job's repository: the repository
// itself, its organization, or the organization's enterprise. Callers hold s.mu.
func (s *Server) canSee(r *runner, j *job) bool { return s.scopeCovers(r.scope, j) }

// scopeCovers reports whether runners registered in scope may run the job. Callers hold s.mu.
func (s *Server) scopeCovers(scope Scope, j *job) bool {
	repo := s.st.repos[j.repoKey]
	switch scope.Kind {
	case ScopeRepository:
		return lower(scope.Name) == j.repoKey
	case ScopeOrganization:
		return repo.org != "" && repo.org == lower(scope.Name)
	case ScopeEnterprise:
		org := s.st.orgs[repo.org]
		return org != nil && org.enterprise != "" && org.enterprise == lower(scope.Name)
	}
	return false
}

// labelsMatch reports whether a runner carries every job label; "self-hosted" is implied, and
// GitHub compares labels case-insensitively.
func labelsMatch(runnerLabels, jobLabels []string) bool {
	for _, want := range jobLabels {
		if strings.EqualFold(want, "self-hosted") {
			continue
		}
		if !slices.ContainsFunc(runnerLabels, func(have string) bool { return strings.EqualFold(have, want) }) {
			return false
		}
	}
	return true
}

// assignNext hands the oldest queued job the runner can take to the runner. A job assigned to
// a scale set goes only to that set's runners, and a set's runner takes only its set's jobs.
// Callers hold s.mu.
func (s *Server) assignNext(r *runner) *job {
	for i, id := range s.st.queued {
		j := s.st.jobs[id]
		if j.scaleSetID != r.scaleSetID || j.offered || !s.canSee(r, j) || !labelsMatch(r.labels, j.Labels) {
			continue
		}
		s.st.queued = slices.Delete(s.st.queued, i, i+1)
		j.Status = StatusInProgress
		j.StartedAt = s.now()
		j.RunnerID, j.RunnerName = r.id, r.name
		j.RunnerGroupID, j.RunnerGroupName = r.group.id, r.group.name
		r.jobID = j.ID
		s.log.Debug("job assigned", "jobID", j.ID, "runner", r.name)
		s.emitJobEvent(j, "in_progress")
		s.scaleSetJobStarted(j, r)
		return j
	}
	return nil
}

// completeJob finishes a job; its runner becomes idle, or is removed if ephemeral, as GitHub
// removes an ephemeral runner after its one job. Callers hold s.mu.
func (s *Server) completeJob(j *job, conclusion string) {
	if j.Status == StatusQueued {
		s.st.queued = slices.DeleteFunc(s.st.queued, func(id int64) bool { return id == j.ID })
	}
	j.Status = StatusCompleted
	j.Conclusion = conclusion
	j.CompletedAt = s.now()
	s.log.Debug("job completed", "jobID", j.ID, "conclusion", conclusion, "runner", j.RunnerName)
	if r, ok := s.st.runners[j.RunnerID]; ok && r.jobID == j.ID {
		r.jobID = 0
		if r.ephemeral {
			s.removeRunner(r)
		}
	}
	s.emitJobEvent(j, "completed")
	s.scaleSetJobCompleted(j)
	s.jobCompleted(j)
}
