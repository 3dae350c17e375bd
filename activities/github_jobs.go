package activities

import (
	"context"
	"errors"
	"net/http"

	"github.com/runnerflow/runnerflow/workflows"
)

// JobInfo is what runnerflow reads of a workflow job: its status and the runner it ran on.
type JobInfo struct {
	ID         int64
	Status     string
	Conclusion string
	RunnerName string
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
// for lost job events). A job GitHub does not know (404) is Gone. The first read that fails
// otherwise ends the list: what was read is returned (the pool reads the rest at its next
// check), or, if nothing was, the classified error, for the policy to retry.
func (a *GitHubActivities) ReadJobs(ctx context.Context, in workflows.ReadJobsInput) (workflows.ReadJobsOutput, error) {
	var out workflows.ReadJobsOutput
	for _, ref := range in.Jobs {
		j, err := a.GitHub.GetJob(ctx, ref.Repository, ref.ID)
		switch {
		case isGitHubStatus(err, http.StatusNotFound):
			out.Jobs = append(out.Jobs, workflows.JobReading{ID: ref.ID, Gone: true})
		case errors.Is(err, ErrBadScope):
			continue // a repository name GitHub could never answer for: nothing to read
		case err != nil:
			if len(out.Jobs) > 0 {
				return out, nil
			}
			return out, classifyGitHubError(callGetJob, err)
		default:
			out.Jobs = append(out.Jobs, workflows.JobReading{ID: ref.ID, Status: j.Status, Conclusion: j.Conclusion, RunnerName: j.RunnerName})
		}
	}
	return out, nil
}
