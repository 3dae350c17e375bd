package activities

import (
	"context"
	"errors"
	"net/http"

	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// JobInfo is what runnerflow reads of a workflow job: its status and the runner it ran on,
// and its runs-on labels (which pools fit it: the pull, github_pull.go).
type JobInfo struct {
	ID         int64
	Status     string
	Conclusion string
	RunnerName string
	Labels     []string
}

// GetJob implements GitHub: GET /repos/{owner}/{repo}/actions/jobs/{job_id}.
func (c *GitHubClient) GetJob(ctx context.Context, repository string, id int64) (JobInfo, error) {
	owner, repo, err := splitRepo(repository)
	if err != nil {
		return JobInfo{}, err
	}
	j, _, err := c.gh.Actions.GetWorkflowJobByID(ctx, owner, repo, id)
	if err != nil {
		return JobInfo{}, err
	}
	return JobInfo{ID: j.GetID(), Status: j.GetStatus(), Conclusion: j.GetConclusion(), RunnerName: j.GetRunnerName()}, nil
}

var callGetJob = githubCall{what: "get workflow job", on422: workflows.ErrInvalidSpec}

// ReadJobs reads the pool's reserved jobs at GitHub, one GET each, in order (the pool's check
// for lost job events). A job GitHub does not know (404) is Gone. A job this credential can
// never read (a repository name GitHub could not answer for, a 403 or 422 for its repository)
// is listed Unread, and the others are still read; if none could be read, that refusal is the
// error. Any other failure (5xx, no answer, the budget spent) fails the whole read with the
// classified error, for the policy to retry: a partial list would pass its unread jobs off as
// read, and the pool accounts for runners that ended unnamed by the jobs it read.
func (a *GitHubActivities) ReadJobs(ctx context.Context, in workflows.ReadJobsInput) (workflows.ReadJobsOutput, error) {
	var out workflows.ReadJobsOutput
	var refused error
	for _, ref := range in.Jobs {
		j, err := a.GitHub.GetJob(ctx, ref.Repository, ref.ID)
		switch {
		case isGitHubStatus(err, http.StatusNotFound):
			out.Jobs = append(out.Jobs, workflows.JobReading{ID: ref.ID, Gone: true})
		case err != nil:
			classified := classifyGitHubError(callGetJob, err)
			if retryable(classified) {
				return workflows.ReadJobsOutput{}, classified
			}
			out.Unread = append(out.Unread, ref.ID)
			refused = classified
		default:
			out.Jobs = append(out.Jobs, workflows.JobReading{ID: ref.ID, Status: j.Status, Conclusion: j.Conclusion, RunnerName: j.RunnerName})
		}
	}
	if len(out.Jobs) == 0 && refused != nil {
		return workflows.ReadJobsOutput{}, refused
	}
	return out, nil
}

// retryable reports whether a classified error may succeed on another try: any error but an
// application error marked non-retryable (Temporal retries the others too).
func retryable(err error) bool {
	var app *temporal.ApplicationError
	return !errors.As(err, &app) || !app.NonRetryable()
}
