package activities

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/google/go-github/v92/github"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/internal/jobgraph"
	"github.com/runnerflow/runnerflow/workflows"
)

// ErrFileTooLarge: GitHub's contents API returns no content for a file over 1 MB (encoding
// "none"); reading it would need the raw media type or the blob API, which a workflow file that
// large does not deserve.
var ErrFileTooLarge = errors.New("file too large for the contents API")

// contentsAPIMaxSize is the largest file the contents API returns the content of.
const contentsAPIMaxSize = 1 << 20

var (
	callGetRun      = githubCall{what: "get workflow run", on422: workflows.ErrInvalidSpec}
	callGetContents = githubCall{what: "get workflow file", on422: workflows.ErrInvalidSpec}
)

// WorkflowRunPath implements GitHub: the path of the workflow file a run runs.
func (c *GitHubClient) WorkflowRunPath(ctx context.Context, repo string, runID int64) (string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return "", err
	}
	run, _, err := c.gh.Actions.GetWorkflowRunByID(ctx, owner, name, runID)
	if err != nil {
		return "", err
	}
	return run.GetPath(), nil
}

// WorkflowFile implements GitHub: a file's content at ref, in one call. No If-None-Match is
// sent: the callers read at a commit SHA, whose files never change, so there is nothing to
// revalidate (and a caller keeping the graph needs no ETag to keep it).
func (c *GitHubClient) WorkflowFile(ctx context.Context, repo, path, ref string) ([]byte, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	file, _, _, err := c.gh.Repositories.GetContents(ctx, owner, name, path, &github.RepositoryContentGetOptions{Ref: ref})
	if err != nil {
		return nil, err
	}
	if file == nil {
		// A directory: no workflow file by that name.
		return nil, &github.ErrorResponse{Response: &http.Response{StatusCode: http.StatusNotFound}, Message: "not a file"}
	}
	if file.GetEncoding() == "none" || (file.GetSize() > contentsAPIMaxSize && file.Content == nil) {
		return nil, ErrFileTooLarge
	}
	content, err := file.GetContent()
	if err != nil {
		return nil, err
	}
	return []byte(content), nil
}

// ReadRunGraph reads a run's workflow file at the run's commit and parses it into the graph
// Predict reads. Given the path (the pool remembers it from an earlier run of the workflow),
// it is one call; without it (a workflow_job event names the run, not its file) it reads the
// run first. A given path that is stale — no file there at the commit, or one of another
// workflow's name (the workflow was moved or renamed) — is dropped for the run's: three calls,
// and the result names the path read, which the caller remembers instead. A missing file, one
// that does not parse and one too large are results naming why there is no graph, not
// failures: the caller decides without a prediction. Other errors are classified as every
// GitHub call's are, and retried by the policy. Neither the result nor any log holds the
// file's content.
func (a *GitHubActivities) ReadRunGraph(ctx context.Context, in workflows.ReadRunGraphInput) (workflows.ReadRunGraphResult, error) {
	if _, _, err := splitRepo(in.Repository); err != nil || in.HeadSHA == "" || (in.Path == "" && in.RunID == 0) {
		return workflows.ReadRunGraphResult{}, temporal.NewNonRetryableApplicationError(
			"read run graph: need a repository (owner/name), a commit and a path or run id", workflows.ErrInvalidSpec, nil)
	}
	var out graphRead
	if in.Path != "" {
		var err error
		out, err = a.readGraphAt(ctx, in, in.Path)
		if err != nil || in.RunID == 0 || !out.stale(in.Workflow) {
			return out.ReadRunGraphResult, err
		}
	}
	calls := out.Calls + 1
	path, err := a.GitHub.WorkflowRunPath(ctx, in.Repository, in.RunID)
	if isGitHubStatus(err, http.StatusNotFound) {
		return workflows.ReadRunGraphResult{NoGraph: workflows.RunGraphNotFound, Calls: calls}, nil
	}
	if err != nil {
		return workflows.ReadRunGraphResult{}, classifyGitHubError(callGetRun, err)
	}
	out, err = a.readGraphAt(ctx, in, path)
	out.Calls += calls
	return out.ReadRunGraphResult, err
}

// graphRead is one read of a file: the result, and the workflow name the file gives itself.
type graphRead struct {
	workflows.ReadRunGraphResult
	name string
}

// stale reports whether the file read at a remembered path is not the run's: none there, or
// it parsed under another workflow name than the run's (when the run's is known). A file
// that does not parse cannot tell; it is taken as the run's, a workflow broken since.
func (r graphRead) stale(workflow string) bool {
	return r.NoGraph == workflows.RunGraphNotFound || (r.Graph != nil && workflow != "" && r.name != workflow)
}

// readGraphAt reads and parses the file at path at the run's commit, in one call.
func (a *GitHubActivities) readGraphAt(ctx context.Context, in workflows.ReadRunGraphInput, path string) (graphRead, error) {
	out := graphRead{ReadRunGraphResult: workflows.ReadRunGraphResult{Path: path, Calls: 1}}
	src, err := a.GitHub.WorkflowFile(ctx, in.Repository, path, in.HeadSHA)
	switch {
	case isGitHubStatus(err, http.StatusNotFound):
		out.NoGraph = workflows.RunGraphNotFound
		return out, nil
	case errors.Is(err, ErrFileTooLarge):
		out.NoGraph = workflows.RunGraphTooLarge
		return out, nil
	case err != nil:
		return graphRead{}, classifyGitHubError(callGetContents, err)
	}
	g, err := jobgraph.Parse(src)
	if err != nil {
		// jobgraph errors name lines and problems, not content; still, the reason is enough.
		out.NoGraph = workflows.RunGraphInvalid
		return out, nil
	}
	rg := g.RunGraph()
	out.Graph = &rg
	// GitHub names a run by its file's name, or by its path when the file names none.
	out.name = cmp.Or(g.Name, path)
	return out, nil
}
