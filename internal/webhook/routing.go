package webhook

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/runnerflow/runnerflow/workflows"
)

// Pool is one running pool as the starter routes to it: what the pool workflow publishes in its
// search attributes.
type Pool struct {
	Name  string
	Scope workflows.Scope
	// Labels are the pool's runner labels, lower-cased.
	Labels []string
	// Group is the pool's runner group; empty means the scope's default group.
	Group string
	// Ephemeral is the pool's workflow memo MemoPoolEphemeral: its runners end with their job.
	// False also when the pool does not publish it (a pool started by an older release).
	Ephemeral bool
}

// JobTarget is what routing needs to know about a workflow_job event.
type JobTarget struct {
	// Repository is "owner/repo".
	Repository string
	// Owner is the repository owner's login.
	Owner string
	// OwnerIsUser is true for a repository owned by a user account (owner.type "User"): only
	// repository-scoped runners can serve it.
	OwnerIsUser bool
	// Enterprise is the enterprise slug from the payload, empty outside an enterprise.
	Enterprise string
	// Labels is the job's runs-on.
	Labels []string
}

// ParseScope reads the RunnerPoolScope keyword ("repo:owner/repo", "org:acme",
// "enterprise:slug"), the inverse of workflows.Scope.String.
func ParseScope(s string) (workflows.Scope, error) {
	kind, value, ok := strings.Cut(s, ":")
	if !ok || value == "" {
		return workflows.Scope{}, fmt.Errorf("scope %q is not kind:value", s)
	}
	switch kind {
	case "repo":
		if owner, repo, ok := strings.Cut(value, "/"); !ok || owner == "" || repo == "" {
			return workflows.Scope{}, fmt.Errorf("repository scope %q is not owner/repo", value)
		}
		return workflows.Scope{Repository: value}, nil
	case "org":
		return workflows.Scope{Organization: value}, nil
	case "enterprise":
		return workflows.Scope{Enterprise: value}, nil
	}
	return workflows.Scope{}, fmt.Errorf("scope %q has unknown kind %q", s, kind)
}

// Precedence tiers, best first. Runner groups and why they shape precedence rather than filter:
// a queued workflow_job payload carries no runner group (runner_group_name is null until a
// runner is assigned), and which groups a repository may use is known only to GitHub's API,
// which the starter does not call (it holds no GitHub credential and must answer fast). Every
// repository in a scope may use that scope's default group, while a custom group may be limited
// to selected repositories. So at each scope level a pool in the default group — one GitHub is
// sure to let the job use — wins over a pool in a custom group, and a custom-group pool is
// chosen only when no default-group pool of that level fits. Because the rule uses only fields
// every event of a job carries, a job's queued and completed events always reach the same pool.
const (
	tierRepository = iota
	tierOrganizationDefault
	tierOrganizationGroup
	tierEnterpriseDefault
	tierEnterpriseGroup
	noTier
)

// Route picks the pool for a job, as ARC does: a pool of the job's repository wins over
// organization pools, which win over enterprise pools (runner groups ordered as above); a
// repository owned by a user can only use repository pools; every job label except
// "self-hosted" must be among the pool's labels, compared case-insensitively (the pool may have
// more). Ties go to the pool whose name sorts first, so every starter replica routes alike. It
// reports false when no pool fits.
func Route(pools []Pool, job JobTarget) (Pool, bool) {
	best, bestTier := Pool{}, noTier
	for _, p := range pools {
		tier := scopeTier(p, job)
		if tier == noTier || !workflows.LabelsFit(p.Labels, job.Labels) {
			continue
		}
		if tier < bestTier || (tier == bestTier && p.Name < best.Name) {
			best, bestTier = p, tier
		}
	}
	return best, bestTier != noTier
}

// scopeTier says at which precedence a pool's scope can serve the job, or noTier.
func scopeTier(p Pool, job JobTarget) int {
	s := p.Scope
	switch {
	case s.Repository != "":
		if strings.EqualFold(s.Repository, job.Repository) {
			return tierRepository
		}
	case job.OwnerIsUser:
		// Organization and enterprise runners never serve user-owned repositories.
	case s.Organization != "":
		if strings.EqualFold(s.Organization, job.Owner) {
			return groupTier(p.Group, tierOrganizationDefault, tierOrganizationGroup)
		}
	case s.Enterprise != "":
		if job.Enterprise != "" && strings.EqualFold(s.Enterprise, job.Enterprise) {
			return groupTier(p.Group, tierEnterpriseDefault, tierEnterpriseGroup)
		}
	}
	return noTier
}

func groupTier(group string, defaultTier, customTier int) int {
	if group == "" || strings.EqualFold(group, "default") {
		return defaultTier
	}
	return customTier
}

// sortPools orders pools by name, so the table's contents never depend on listing order.
func sortPools(pools []Pool) {
	slices.SortFunc(pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
}
