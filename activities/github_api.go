package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v92/github"

	"github.com/runnerflow/runnerflow/workflows"
)

// This file maps GitHub's three runner scopes (repository, organization, enterprise) onto
// go-github's calls; nothing here classifies or retries. A refused enterprise call is explained
// (scopeError), since GitHub's own message does not say which credential would do.

// CreateJITConfig implements GitHub.
func (c *GitHubClient) CreateJITConfig(ctx context.Context, scope workflows.Scope, req JITRequest) (JITConfig, error) {
	body := github.CreateJITConfigRequest{Name: req.Name, RunnerGroupID: req.RunnerGroupID, Labels: req.Labels}
	if req.WorkFolder != "" {
		body.WorkFolder = new(req.WorkFolder)
	}
	var (
		cfg *github.JITRunnerConfig
		err error
	)
	switch {
	case scope.Repository != "":
		owner, repo, serr := splitRepo(scope.Repository)
		if serr != nil {
			return JITConfig{}, serr
		}
		cfg, _, err = c.gh.Actions.CreateRepoJITConfig(ctx, owner, repo, body)
	case scope.Organization != "":
		cfg, _, err = c.gh.Actions.CreateOrgJITConfig(ctx, scope.Organization, body)
	default:
		cfg, _, err = c.gh.Enterprise.CreateJITConfig(ctx, scope.Enterprise, body)
	}
	if err != nil {
		return JITConfig{}, c.scopeError(scope, err)
	}
	if cfg.GetEncodedJITConfig() == "" || cfg.GetRunner().GetID() == 0 {
		return JITConfig{}, fmt.Errorf("generate-jitconfig answered without a runner or configuration")
	}
	return JITConfig{Runner: runnerInfo(cfg.GetRunner()), EncodedConfig: cfg.GetEncodedJITConfig()}, nil
}

// CreateRegistrationToken implements GitHub.
func (c *GitHubClient) CreateRegistrationToken(ctx context.Context, scope workflows.Scope) (string, error) {
	var (
		tok *github.RegistrationToken
		err error
	)
	switch {
	case scope.Repository != "":
		owner, repo, serr := splitRepo(scope.Repository)
		if serr != nil {
			return "", serr
		}
		tok, _, err = c.gh.Actions.CreateRegistrationToken(ctx, owner, repo)
	case scope.Organization != "":
		tok, _, err = c.gh.Actions.CreateOrganizationRegistrationToken(ctx, scope.Organization)
	default:
		tok, _, err = c.gh.Enterprise.CreateRegistrationToken(ctx, scope.Enterprise)
	}
	if err != nil {
		return "", c.scopeError(scope, err)
	}
	if tok.GetToken() == "" {
		return "", fmt.Errorf("registration-token answered without a token")
	}
	return tok.GetToken(), nil
}

// ListRunners implements GitHub: one request per page of 100.
func (c *GitHubClient) ListRunners(ctx context.Context, scope workflows.Scope, name string) ([]RunnerInfo, error) {
	opts := &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 100}}
	if name != "" {
		opts.Name = new(name)
	}
	var out []RunnerInfo
	for {
		page, resp, err := c.listRunnersPage(ctx, scope, opts)
		if err != nil {
			return nil, c.scopeError(scope, err)
		}
		for _, r := range page.Runners {
			out = append(out, runnerInfo(r))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func (c *GitHubClient) listRunnersPage(ctx context.Context, scope workflows.Scope, opts *github.ListRunnersOptions) (*github.Runners, *github.Response, error) {
	switch {
	case scope.Repository != "":
		owner, repo, err := splitRepo(scope.Repository)
		if err != nil {
			return nil, nil, err
		}
		return c.gh.Actions.ListRunners(ctx, owner, repo, opts)
	case scope.Organization != "":
		return c.gh.Actions.ListOrganizationRunners(ctx, scope.Organization, opts)
	}
	return c.gh.Enterprise.ListRunners(ctx, scope.Enterprise, opts)
}

// GetRunner implements GitHub.
func (c *GitHubClient) GetRunner(ctx context.Context, scope workflows.Scope, id int64) (RunnerInfo, error) {
	var (
		r   *github.Runner
		err error
	)
	switch {
	case scope.Repository != "":
		owner, repo, serr := splitRepo(scope.Repository)
		if serr != nil {
			return RunnerInfo{}, serr
		}
		r, _, err = c.gh.Actions.GetRunner(ctx, owner, repo, id)
	case scope.Organization != "":
		r, _, err = c.gh.Actions.GetOrganizationRunner(ctx, scope.Organization, id)
	default:
		r, _, err = c.gh.Enterprise.GetRunner(ctx, scope.Enterprise, id)
	}
	if err != nil {
		return RunnerInfo{}, c.scopeError(scope, err)
	}
	return runnerInfo(r), nil
}

// RemoveRunner implements GitHub.
func (c *GitHubClient) RemoveRunner(ctx context.Context, scope workflows.Scope, id int64) error {
	var err error
	switch {
	case scope.Repository != "":
		owner, repo, serr := splitRepo(scope.Repository)
		if serr != nil {
			return serr
		}
		_, err = c.gh.Actions.RemoveRunner(ctx, owner, repo, id)
	case scope.Organization != "":
		_, err = c.gh.Actions.RemoveOrganizationRunner(ctx, scope.Organization, id)
	default:
		_, err = c.gh.Enterprise.RemoveRunner(ctx, scope.Enterprise, id)
	}
	return c.scopeError(scope, err)
}

// RunnerGroupID implements GitHub. The Default group needs no call; a named group is looked up
// once per runnerGroupCacheTTL.
func (c *GitHubClient) RunnerGroupID(ctx context.Context, scope workflows.Scope, name string) (int64, error) {
	if name == "" || strings.EqualFold(name, "default") {
		return defaultRunnerGroupID, nil
	}
	if scope.Repository != "" {
		return 0, fmt.Errorf("%w: repository runners belong to the Default group only, not %q", ErrBadScope, name)
	}
	key := scope.String() + "/" + strings.ToLower(name)
	c.mu.Lock()
	cached, ok := c.groups[key]
	c.mu.Unlock()
	if ok && time.Now().Before(cached.expires) {
		return cached.id, nil
	}
	id, err := c.lookupRunnerGroup(ctx, scope, name)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.groups[key] = cachedGroup{id: id, expires: time.Now().Add(runnerGroupCacheTTL)}
	c.mu.Unlock()
	return id, nil
}

func (c *GitHubClient) lookupRunnerGroup(ctx context.Context, scope workflows.Scope, name string) (int64, error) {
	opts := github.ListOptions{PerPage: 100}
	for {
		var (
			groups []runnerGroup
			resp   *github.Response
			err    error
		)
		if scope.Organization != "" {
			var page *github.RunnerGroups
			page, resp, err = c.gh.Actions.ListOrganizationRunnerGroups(ctx, scope.Organization, &github.ListOrgRunnerGroupOptions{ListOptions: opts})
			for _, g := range page.GetRunnerGroups() {
				groups = append(groups, runnerGroup{g.GetID(), g.GetName()})
			}
		} else {
			var page *github.EnterpriseRunnerGroups
			page, resp, err = c.gh.Enterprise.ListRunnerGroups(ctx, scope.Enterprise, &github.ListEnterpriseRunnerGroupOptions{ListOptions: opts})
			for _, g := range page.GetRunnerGroups() {
				groups = append(groups, runnerGroup{g.GetID(), g.GetName()})
			}
		}
		if err != nil {
			return 0, c.scopeError(scope, err)
		}
		for _, g := range groups {
			if strings.EqualFold(g.name, name) {
				return g.id, nil
			}
		}
		if resp.NextPage == 0 {
			return 0, fmt.Errorf("%w: %q in %s", ErrNoSuchRunnerGroup, name, scope)
		}
		opts.Page = resp.NextPage
	}
}

type runnerGroup struct {
	id   int64
	name string
}

func runnerInfo(r *github.Runner) RunnerInfo {
	return RunnerInfo{ID: r.GetID(), Name: r.GetName(), Online: r.GetStatus() == "online", Busy: r.GetBusy()}
}
