package githubdouble

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// This file renders GitHub's large object shapes (users, repositories, organizations, runs,
// jobs). They carry every field GitHub's schemas require, because go-github and webhook
// consumers are written against real payloads, and the contract test checks them against the
// schemas. Callers hold s.mu.

// webHost is where html_url links point; the double serves no web pages.
const webHost = "https://github.com"

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s%d", kind, id))
}

// renderUser renders GitHub's simple-user for a user or organization account.
func (s *Server) renderUser(login string, id int64, typ string) map[string]any {
	api := s.baseURL + "users/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": nodeID(typ, id), "type": typ, "site_admin": false,
		"avatar_url":          fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id),
		"gravatar_id":         "",
		"url":                 api,
		"html_url":            webHost + "/" + login,
		"followers_url":       api + "/followers",
		"following_url":       api + "/following{/other_user}",
		"gists_url":           api + "/gists{/gist_id}",
		"starred_url":         api + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "/subscriptions",
		"organizations_url":   api + "/orgs",
		"repos_url":           api + "/repos",
		"events_url":          api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
		"user_view_type":      "public",
	}
}

// sender is the account that triggers every event of the double.
func (s *Server) sender() map[string]any { return s.renderUser("octocat", 583231, "User") }

// repoURLTemplates are the hypermedia links of a repository, relative to its API URL.
var repoURLTemplates = map[string]string{
	"archive_url": "/{archive_format}{/ref}", "assignees_url": "/assignees{/user}",
	"blobs_url": "/git/blobs{/sha}", "branches_url": "/branches{/branch}",
	"collaborators_url": "/collaborators{/collaborator}", "comments_url": "/comments{/number}",
	"commits_url": "/commits{/sha}", "compare_url": "/compare/{base}...{head}",
	"contents_url": "/contents/{+path}", "contributors_url": "/contributors",
	"deployments_url": "/deployments", "downloads_url": "/downloads", "events_url": "/events",
	"forks_url": "/forks", "git_commits_url": "/git/commits{/sha}", "git_refs_url": "/git/refs{/sha}",
	"git_tags_url": "/git/tags{/sha}", "hooks_url": "/hooks",
	"issue_comment_url": "/issues/comments{/number}", "issue_events_url": "/issues/events{/number}",
	"issues_url": "/issues{/number}", "keys_url": "/keys{/key_id}", "labels_url": "/labels{/name}",
	"languages_url": "/languages", "merges_url": "/merges", "milestones_url": "/milestones{/number}",
	"notifications_url": "/notifications{?since,all,participating}", "pulls_url": "/pulls{/number}",
	"releases_url": "/releases{/id}", "stargazers_url": "/stargazers",
	"statuses_url": "/statuses/{sha}", "subscribers_url": "/subscribers",
	"subscription_url": "/subscription", "tags_url": "/tags", "teams_url": "/teams",
	"trees_url": "/git/trees{/sha}",
}

// renderRepository renders a repository with the fields of both minimal-repository (REST) and
// repository-webhooks (events).
func (s *Server) renderRepository(repo *repository) map[string]any {
	api := s.baseURL + "repos/" + repo.fullName()
	created := formatTime(repo.created)
	out := map[string]any{
		"id": repo.id, "node_id": nodeID("Repository", repo.id), "name": repo.name,
		"full_name": repo.fullName(), "private": true, "visibility": "private",
		"owner": s.renderUser(repo.owner, repo.ownerID, repo.ownerType), "description": nil,
		"fork": false, "url": api, "html_url": webHost + "/" + repo.fullName(),
		"git_url":   "git://github.com/" + repo.fullName() + ".git",
		"ssh_url":   "git@github.com:" + repo.fullName() + ".git",
		"clone_url": webHost + "/" + repo.fullName() + ".git", "svn_url": webHost + "/" + repo.fullName(),
		"mirror_url": nil, "homepage": nil, "language": nil, "license": nil,
		"forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0, "watchers_count": 0,
		"size": 0, "open_issues": 0, "open_issues_count": 0, "default_branch": "main",
		"has_issues": true, "has_projects": true, "has_wiki": true, "has_pages": false,
		"has_downloads": true, "has_discussions": false, "archived": false, "disabled": false,
		"is_template": false, "topics": []string{},
		"created_at": created, "updated_at": created, "pushed_at": created,
	}
	for field, suffix := range repoURLTemplates {
		out[field] = api + suffix
	}
	return out
}

// renderOrganization renders organization-simple-webhooks.
func (s *Server) renderOrganization(org *organization) map[string]any {
	api := s.baseURL + "orgs/" + org.login
	return map[string]any{
		"login": org.login, "id": org.id, "node_id": nodeID("Organization", org.id), "url": api,
		"repos_url": api + "/repos", "events_url": api + "/events", "hooks_url": api + "/hooks",
		"issues_url": api + "/issues", "members_url": api + "/members{/member}",
		"public_members_url": api + "/public_members{/member}",
		"avatar_url":         fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", org.id),
		"description":        nil,
	}
}

// renderEnterprise renders enterprise-webhooks.
func (s *Server) renderEnterprise(ent *enterprise) map[string]any {
	created := formatTime(ent.created)
	return map[string]any{
		"id": ent.id, "node_id": nodeID("Enterprise", ent.id), "slug": ent.slug,
		"name": ent.slug, "html_url": webHost + "/enterprises/" + ent.slug,
		"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/b/%d?v=4", ent.id),
		"created_at": created, "updated_at": created, "website_url": nil, "description": nil,
	}
}

// jobJSON is a workflow job: GitHub's "job" schema in the REST API and the workflow_job object
// of webhooks, which share their fields.
type jobJSON struct {
	ID              int64      `json:"id"`
	RunID           int64      `json:"run_id"`
	WorkflowName    *string    `json:"workflow_name"`
	HeadBranch      *string    `json:"head_branch"`
	RunURL          string     `json:"run_url"`
	RunAttempt      int        `json:"run_attempt"`
	NodeID          string     `json:"node_id"`
	HeadSHA         string     `json:"head_sha"`
	URL             string     `json:"url"`
	HTMLURL         string     `json:"html_url"`
	Status          string     `json:"status"`
	Conclusion      *string    `json:"conclusion"`
	CreatedAt       string     `json:"created_at"`
	StartedAt       string     `json:"started_at"`
	CompletedAt     *string    `json:"completed_at"`
	Name            string     `json:"name"`
	Steps           []stepJSON `json:"steps"`
	CheckRunURL     string     `json:"check_run_url"`
	Labels          []string   `json:"labels"`
	RunnerID        *int64     `json:"runner_id"`
	RunnerName      *string    `json:"runner_name"`
	RunnerGroupID   *int64     `json:"runner_group_id"`
	RunnerGroupName *string    `json:"runner_group_name"`
}

type stepJSON struct {
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	Conclusion  *string `json:"conclusion"`
	Number      int     `json:"number"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
}

func ptr[T any](v T) *T { return &v }

// renderJob renders a job in GitHub's shape.
func (s *Server) renderJob(j *job) jobJSON {
	api := s.baseURL + "repos/" + j.Repository
	out := jobJSON{
		ID: j.ID, RunID: j.RunID, WorkflowName: ptr(j.Workflow), HeadBranch: ptr(j.HeadBranch),
		RunURL: fmt.Sprintf("%s/actions/runs/%d", api, j.RunID), RunAttempt: 1,
		NodeID: nodeID("CheckRun", j.ID), HeadSHA: j.HeadSHA,
		URL:     fmt.Sprintf("%s/actions/jobs/%d", api, j.ID),
		HTMLURL: fmt.Sprintf("%s/%s/actions/runs/%d/job/%d", webHost, j.Repository, j.RunID, j.ID),
		Status:  j.Status, CreatedAt: formatTime(j.CreatedAt), StartedAt: formatTime(j.StartedAt),
		Name: j.Name, Steps: s.renderSteps(j), CheckRunURL: fmt.Sprintf("%s/check-runs/%d", api, j.ID),
		Labels: append([]string{}, j.Labels...),
	}
	if j.Status == StatusCompleted {
		out.Conclusion, out.CompletedAt = ptr(j.Conclusion), ptr(formatTime(j.CompletedAt))
	}
	if j.RunnerID != 0 {
		out.RunnerID, out.RunnerName = ptr(j.RunnerID), ptr(j.RunnerName)
		out.RunnerGroupID, out.RunnerGroupName = ptr(j.RunnerGroupID), ptr(j.RunnerGroupName)
	}
	return out
}

// renderSteps gives a job that reached a runner its "Set up job" step.
func (s *Server) renderSteps(j *job) []stepJSON {
	if j.RunnerID == 0 {
		return []stepJSON{}
	}
	step := stepJSON{Name: "Set up job", Status: StatusInProgress, Number: 1, StartedAt: ptr(formatTime(j.StartedAt))}
	if j.Status == StatusCompleted {
		step.Status, step.Conclusion = StatusCompleted, ptr(ConclusionSuccess)
		step.CompletedAt = ptr(formatTime(j.StartedAt))
	}
	return []stepJSON{step}
}

// runPath is the workflow file of a job's run: the one it was queued with, else one named
// after the workflow.
func (s *Server) runPath(j *job) string {
	if j.path != "" {
		return j.path
	}
	return ".github/workflows/" + strings.ToLower(strings.ReplaceAll(j.Workflow, " ", "-")) + ".yml"
}

// renderRun renders the workflow run of a job (each queued job has a run of its own).
func (s *Server) renderRun(j *job, repo *repository) map[string]any {
	api := s.baseURL + "repos/" + j.Repository
	runAPI := fmt.Sprintf("%s/actions/runs/%d", api, j.RunID)
	var conclusion any
	if j.Status == StatusCompleted {
		conclusion = j.Conclusion
	}
	updated := j.CreatedAt
	for _, t := range []time.Time{j.StartedAt, j.CompletedAt} {
		if t.After(updated) {
			updated = t
		}
	}
	repoJSON := s.renderRepository(repo)
	return map[string]any{
		"id": j.RunID, "name": j.Workflow, "node_id": nodeID("WorkflowRun", j.RunID),
		"head_branch": j.HeadBranch, "head_sha": j.HeadSHA, "display_title": j.Workflow,
		"path":       s.runPath(j),
		"run_number": j.RunID, "run_attempt": 1, "event": "push", "status": j.Status,
		"conclusion": conclusion, "workflow_id": 1, "check_suite_id": j.RunID,
		"url": runAPI, "html_url": fmt.Sprintf("%s/%s/actions/runs/%d", webHost, j.Repository, j.RunID),
		"pull_requests": []any{}, "created_at": formatTime(j.CreatedAt), "updated_at": formatTime(updated),
		"run_started_at": formatTime(j.StartedAt), "actor": s.sender(), "triggering_actor": s.sender(),
		"jobs_url": runAPI + "/jobs", "logs_url": runAPI + "/logs", "check_suite_url": fmt.Sprintf("%s/check-suites/%d", api, j.RunID),
		"artifacts_url": runAPI + "/artifacts", "cancel_url": runAPI + "/cancel", "rerun_url": runAPI + "/rerun",
		"previous_attempt_url": nil, "workflow_url": api + "/actions/workflows/1",
		"head_commit": map[string]any{
			"id": j.HeadSHA, "tree_id": j.HeadSHA, "message": "Change", "timestamp": formatTime(j.CreatedAt),
			"author":    map[string]any{"name": "Octocat", "email": "octocat@github.com"},
			"committer": map[string]any{"name": "Octocat", "email": "octocat@github.com"},
		},
		"repository": repoJSON, "head_repository": repoJSON, "head_repository_id": repo.id,
	}
}
