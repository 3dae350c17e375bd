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

// JobsPage is one page of a run's jobs (its latest attempt); Next says GitHub links a next
// page (unknown on a 304, whose answer is the last one's).
type JobsPage struct {
	Conditional
	Jobs []JobInfo
	Next bool
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
	cond, _, err := c.conditionalGet(ctx, path, etag, &runs)
	if err != nil || cond.NotModified {
		return RunsPage{Conditional: cond}, err
	}
	page := RunsPage{Conditional: cond}
	for _, r := range runs.WorkflowRuns {
		page.RunIDs = append(page.RunIDs, r.GetID())
	}
	return page, nil
}

// ListRunJobs implements GitHub: one page (from 1) of 100 of the jobs of a run's latest
// attempt, asked with If-None-Match: etag when set.
func (c *GitHubClient) ListRunJobs(ctx context.Context, repo string, runID int64, page int, etag string) (JobsPage, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return JobsPage{}, err
	}
	path := fmt.Sprintf("repos/%s/%s/actions/runs/%d/jobs?filter=latest&per_page=%d", url.PathEscape(owner), url.PathEscape(name), runID, workflows.PullJobsPerPage)
	if page > 1 {
		path += fmt.Sprintf("&page=%d", page)
	}
	var jobs github.Jobs
	cond, next, err := c.conditionalGet(ctx, path, etag, &jobs)
	if err != nil || cond.NotModified {
		return JobsPage{Conditional: cond}, err
	}
	out := JobsPage{Conditional: cond, Next: next}
	for _, j := range jobs.Jobs {
		out.Jobs = append(out.Jobs, JobInfo{ID: j.GetID(), Status: j.GetStatus(), Conclusion: j.GetConclusion(), RunnerName: j.GetRunnerName(), Labels: j.Labels})
	}
	return out, nil
}

// conditionalGet makes one GET with go-github, sending If-None-Match when etag is set. A 304
// is NotModified, not an error (go-github reports every status outside 2xx as one). next says
// the answer links a next page.
func (c *GitHubClient) conditionalGet(ctx context.Context, path, etag string, into any) (Conditional, bool, error) {
	req, err := c.gh.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return Conditional{}, false, err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.gh.Do(req, into)
	if isGitHubStatus(err, http.StatusNotModified) {
		return Conditional{ETag: etag, NotModified: true}, false, nil
	}
	if err != nil {
		return Conditional{}, false, err
	}
	return Conditional{ETag: resp.Header.Get("ETag")}, resp.NextPage != 0, nil
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
			// No room: the last answer stands without a call; a run never read is unknown.
			pr.Runs = append(pr.Runs, keptRun(id, prev))
			continue
		}
		run, err := a.pullRun(ctx, runRead{repo: repo, prev: prev, labels: in.Labels, all: in.AllLabels, out: out, left: left}, id)
		if isGitHubStatus(err, http.StatusNotFound) {
			continue // the run was deleted since it was listed
		}
		if err != nil {
			return pr, classifyGitHubError(callListJobs, err)
		}
		pr.Runs = append(pr.Runs, run)
	}
	return pr, nil
}

// runRead is what reading one run's jobs needs: the repository, the run's last answer, the
// pool's labels, and the read's result and room (PullJobListingsPerRead) to account to.
type runRead struct {
	repo   string
	prev   workflows.PulledRun
	labels []string
	all    bool
	out    *workflows.PullJobsResult
	left   *int
}

// pullRun reads a run's jobs page by page, each page conditional on its last ETag, up to
// PullJobPagesPerRun pages while the read has room. A page beyond either is not read: a page
// with a last answer keeps it (NotModified, no call), one without makes the run Unread.
func (a *GitHubActivities) pullRun(ctx context.Context, rr runRead, id int64) (workflows.PulledRun, error) {
	run := workflows.PulledRun{RunID: id}
	for n, more := 1, true; more; n++ {
		etag := pageETag(rr.prev, n)
		if n > workflows.PullJobPagesPerRun || (*rr.left <= 0 && etag == "") {
			run.Unread = true
			break
		}
		page := workflows.PulledPage{ETag: etag, NotModified: true}
		more = n < len(rr.prev.More)+1 || rr.prev.Unread // the last answer's, which a 304 keeps
		if *rr.left > 0 {
			*rr.left--
			got, err := a.GitHub.ListRunJobs(ctx, rr.repo, id, n, etag)
			countPullCall(rr.out, got.Conditional, err)
			if err != nil {
				return run, err
			}
			page = workflows.PulledPage{ETag: got.ETag, NotModified: got.NotModified}
			if !got.NotModified {
				page.Jobs, more = fittingJobs(got.Jobs, rr.labels, rr.all), got.Next
			}
		}
		setPage(&run, n, page)
	}
	return run, nil
}

// keptRun is a run the read had no room for: its last answer, every page NotModified, or
// Unread when it has none.
func keptRun(id int64, prev workflows.PulledRun) workflows.PulledRun {
	if prev.ETag == "" {
		return workflows.PulledRun{RunID: id, Unread: true}
	}
	run := workflows.PulledRun{RunID: id, ETag: prev.ETag, NotModified: true, Unread: prev.Unread}
	for _, p := range prev.More {
		run.More = append(run.More, workflows.PulledPage{ETag: p.ETag, NotModified: true})
	}
	return run
}

// pageETag is the last answer's ETag of page n of a run ("" when it has none).
func pageETag(prev workflows.PulledRun, n int) string {
	switch {
	case n == 1:
		return prev.ETag
	case n-2 < len(prev.More):
		return prev.More[n-2].ETag
	}
	return ""
}

// setPage puts page n's answer in the run.
func setPage(run *workflows.PulledRun, n int, p workflows.PulledPage) {
	if n == 1 {
		run.ETag, run.Jobs, run.NotModified = p.ETag, p.Jobs, p.NotModified
		return
	}
	run.More = append(run.More, p)
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

// fittingJobs keeps the queued and in-progress jobs runners with labels can run; with all, every
// one of them with its labels (a shared read, whose pools each take their own).
func fittingJobs(jobs []JobInfo, labels []string, all bool) []workflows.PulledJob {
	var out []workflows.PulledJob
	for _, j := range jobs {
		if j.Status != workflows.JobQueued && j.Status != workflows.JobInProgress {
			continue
		}
		switch {
		case all:
			out = append(out, workflows.PulledJob{ID: j.ID, Status: j.Status, RunnerName: j.RunnerName, Labels: j.Labels})
		case workflows.LabelsFit(labels, j.Labels):
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
