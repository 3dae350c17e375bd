package workflows

import (
	"slices"
	"strings"
)

// ActivityListRunners lists a scope's runners whose names start with a prefix, one paginated
// listing per call (100 runners a page): O(scopes) GitHub calls, not O(runners). The pool uses it
// to learn which runners are online or busy and to find orphans; it signals only the runners whose
// status changed.
const ActivityListRunners = "ListRunners"

// ListRunnersInput asks for one scope's runners.
type ListRunnersInput struct {
	Scope Scope `json:"scope"`
	// NamePrefix keeps only runners whose name starts with it (a pool's "<pool>-").
	NamePrefix string `json:"namePrefix"`
	// NamePrefixes, when set, keeps only runners whose name starts with one of them (the
	// "<pool>-" of each pool a scope's listing serves), so the listing's result holds the
	// runners of the pools that asked, not every runner of the organization.
	NamePrefixes []string `json:"namePrefixes,omitempty"`
}

// Keeps reports whether a runner name passes the input's name filters.
func (in ListRunnersInput) Keeps(name string) bool {
	if !strings.HasPrefix(name, in.NamePrefix) {
		return false
	}
	return len(in.NamePrefixes) == 0 || slices.ContainsFunc(in.NamePrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// RunnerListing is one runner as GitHub lists it.
type RunnerListing struct {
	Name   string `json:"name"`
	ID     int64  `json:"id"`
	Online bool   `json:"online"`
	Busy   bool   `json:"busy"`
}

// ListRunnersResult holds the listed runners, sorted by name.
type ListRunnersResult struct {
	Runners []RunnerListing `json:"runners"`
}
