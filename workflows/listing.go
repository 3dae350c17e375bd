package workflows

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
