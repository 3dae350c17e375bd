package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v92/github"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// This file is the pull: a pool's queued and in-progress jobs read from GitHub's workflow-run
// and job listings with conditional requests. GitHub answers 304 Not Modified to a request
// whose If-None-Match names the answer's current ETag, and does not charge it to the hour's
// budget; the pool keeps each answer with its ETag, so a quiet repository costs nothing.

// Conditional is one conditional GET's outcome: NotModified (the answer named by the ETag
// sent still holds) or a new answer with its ETag.
type Conditional struct {
	ETag        string
	NotModified bool
}

// RunsPage is one page of a repository's runs of one status, newest first.
type RunsPage struct {
	Conditional
	RunIDs []int64
}

// JobsPage is one page of a run's jobs (its latest attempt).
type JobsPage struct {
	Conditional
	Jobs []JobInfo
}

// ListRuns implements GitHub: one page of runs of repo ("owner/repo") with status, asked with
// If-None-Match: etag when set.
func (c *GitHubClient) ListRuns(ctx context.Context, repo, status, etag string) (RunsPage, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return RunsPage{}, err
	}
	path := fmt.Sprintf("repos/%s/%s/actions/runs?status=%s&per_page=%d",
		url.PathEscape(owner), url.PathEscape(name), url.QueryEscape(status), workflows.PullRunsPerListing)
	var runs github.WorkflowRuns
	cond, err := c.conditionalGet(ctx, path, etag, &runs)
	if err != nil || cond.NotModified {
		return RunsPage{Conditional: cond}, err
	}
	page := RunsPage{Conditional: cond}
	for _, r := range runs.WorkflowRuns {
		page.RunIDs = append(page.RunIDs, r.GetID())
	}
	return page, nil
}

// ListRunJobs implements GitHub: the jobs of a run's latest attempt (one page of 100; a run
// has at most 256 jobs, and a pool rarely fits more than a page of one run's), asked with
// If-None-Match: etag when set.
func (c *GitHubClient) ListRunJobs(ctx context.Context, repo string, runID int64, etag string) (JobsPage, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return JobsPage{}, err
	}
	path := fmt.Sprintf("repos/%s/%s/actions/runs/%d/jobs?filter=latest&per_page=100", url.PathEscape(owner), url.PathEscape(name), runID)
	var jobs github.Jobs
	cond, err := c.conditionalGet(ctx, path, etag, &jobs)
	if err != nil || cond.NotModified {
		return JobsPage{Conditional: cond}, err
	}
	page := JobsPage{Conditional: cond}
	for _, j := range jobs.Jobs {
		page.Jobs = append(page.Jobs, JobInfo{ID: j.GetID(), Status: j.GetStatus(), Conclusion: j.GetConclusion(), RunnerName: j.GetRunnerName(), Labels: j.Labels})
	}
	return page, nil
}

// conditionalGet makes one GET with go-github, sending If-None-Match when etag is set. A 304
// is NotModified, not an error (go-github reports every status outside 2xx as one).
func (c *GitHubClient) conditionalGet(ctx context.Context, path, etag string, into any) (Conditional, error) {
	req, err := c.gh.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return Conditional{}, err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.gh.Do(req, into)
	if isGitHubStatus(err, http.StatusNotModified) {
		return Conditional{ETag: etag, NotModified: true}, nil
	}
	if err != nil {
		return Conditional{}, err
	}
	return Conditional{ETag: resp.Header.Get("ETag")}, nil
}

var (
	callListRuns = githubCall{what: "list workflow runs", on422: workflows.ErrInvalidSpec}
	callListJobs = githubCall{what: "list workflow jobs", on422: workflows.ErrInvalidSpec}
)

// pullStatuses are the run statuses whose jobs may need or hold a runner.
var pullStatuses = []string{workflows.JobQueued, workflows.JobInProgress}

// PullJobs reads the queued and in-progress jobs of a pool's repositories that its runners
// fit: per repository, the runs listed as queued and as in progress, then each such run's
// jobs; every request conditional on the last answer's ETag (in.Last). A listing answered 304
// keeps the runs it named; a run answered 304 comes back NotModified, its jobs being the
// pool's. It only reads, so a retry repeats nothing harmful.
func (a *GitHubActivities) PullJobs(ctx context.Context, in workflows.PullJobsInput) (workflows.PullJobsResult, error) {
	out := workflows.PullJobsResult{ReadAt: time.Now()}
	left := workflows.PullJobListingsPerRead
	for _, repo := range in.Repos {
		if _, _, err := splitRepo(repo); err != nil {
			return workflows.PullJobsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
		}
		pr, err := a.pullRepo(ctx, in, repo, &out, &left)
		if err != nil {
			return workflows.PullJobsResult{}, err
		}
		out.Repos = append(out.Repos, pr)
	}
	return out, nil
}

// pullRepo reads one repository: its two runs listings, then the jobs of their runs while
// *left allows, the runs never read before first. A run it has no room for keeps its last
// answer (returned NotModified, with no call), or waits for the next read if it has none.
func (a *GitHubActivities) pullRepo(ctx context.Context, in workflows.PullJobsInput, repo string, out *workflows.PullJobsResult, left *int) (workflows.PulledRepo, error) {
	last := lastPulled(in.Last, repo)
	pr := workflows.PulledRepo{Repository: repo}
	var runIDs []int64
	for _, status := range pullStatuses {
		prev := lastListing(last, status)
		page, err := a.GitHub.ListRuns(ctx, repo, status, prev.ETag)
		countPullCall(out, page.Conditional, err)
		if err != nil {
			return pr, classifyGitHubError(callListRuns, err)
		}
		l := workflows.PulledListing{Status: status, ETag: page.ETag, RunIDs: page.RunIDs}
		if page.NotModified {
			l.RunIDs = prev.RunIDs
		}
		pr.Listings = append(pr.Listings, l)
		runIDs = append(runIDs, l.RunIDs...)
	}
	slices.Sort(runIDs)
	runIDs = slices.Compact(runIDs)
	// Runs never read first (a new job waits on them), then the others, oldest first.
	slices.SortStableFunc(runIDs, func(x, y int64) int { return cmpBool(lastRun(last, x).ETag != "", lastRun(last, y).ETag != "") })
	for _, id := range runIDs {
		prev := lastRun(last, id)
		if *left <= 0 {
			if prev.ETag != "" {
				pr.Runs = append(pr.Runs, workflows.PulledRun{RunID: id, ETag: prev.ETag, NotModified: true})
			}
			continue
		}
		*left--
		page, err := a.GitHub.ListRunJobs(ctx, repo, id, prev.ETag)
		countPullCall(out, page.Conditional, err)
		if isGitHubStatus(err, http.StatusNotFound) {
			continue // the run was deleted since it was listed
		}
		if err != nil {
			return pr, classifyGitHubError(callListJobs, err)
		}
		run := workflows.PulledRun{RunID: id, ETag: page.ETag, NotModified: page.NotModified}
		if !page.NotModified {
			run.Jobs = fittingJobs(page.Jobs, in.Labels)
		}
		pr.Runs = append(pr.Runs, run)
	}
	return pr, nil
}

// cmpBool orders false before true.
func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

// count records one request of the pull and whether GitHub answered 304.
func countPullCall(out *workflows.PullJobsResult, c Conditional, err error) {
	out.Calls++
	if err == nil && c.NotModified {
		out.NotModified++
	}
}

// fittingJobs keeps the queued and in-progress jobs runners with labels can run.
func fittingJobs(jobs []JobInfo, labels []string) []workflows.PulledJob {
	var out []workflows.PulledJob
	for _, j := range jobs {
		if (j.Status == workflows.JobQueued || j.Status == workflows.JobInProgress) && workflows.LabelsFit(labels, j.Labels) {
			out = append(out, workflows.PulledJob{ID: j.ID, Status: j.Status, RunnerName: j.RunnerName})
		}
	}
	return out
}

func lastPulled(last []workflows.PulledRepo, repo string) workflows.PulledRepo {
	for _, r := range last {
		if strings.EqualFold(r.Repository, repo) {
			return r
		}
	}
	return workflows.PulledRepo{}
}

func lastListing(r workflows.PulledRepo, status string) workflows.PulledListing {
	for _, l := range r.Listings {
		if l.Status == status {
			return l
		}
	}
	return workflows.PulledListing{}
}

func lastRun(r workflows.PulledRepo, id int64) workflows.PulledRun {
	for _, run := range r.Runs {
		if run.RunID == id {
			return run
		}
	}
	return workflows.PulledRun{}
}
