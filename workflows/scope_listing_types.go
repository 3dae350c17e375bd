package workflows

import (
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// ScopeListingWorkflowID is the id of a scope's one listing workflow. GitHub's owner,
// repository and enterprise names are case-insensitive, so the id is lower-cased.
func ScopeListingWorkflowID(s Scope) string { return "listing/" + strings.ToLower(s.String()) }

// Signals of the scope listing workflow and of the pool.
const (
	// SignalListingDemand is a pool asking its scope's listing workflow for listings
	// (ListingDemand).
	SignalListingDemand = "listing-demand"
	// SignalScopeListing is the scope's listing workflow telling a pool its runners as GitHub
	// lists them (ScopeListingSignal).
	SignalScopeListing = "scope-listing"
)

// scopeListingServing is how a scope's listing workflow serves its pools (servePools).
var scopeListingServing = serving{demandSignal: SignalListingDemand, partSignal: SignalScopeListing,
	idleExit: ScopeListingIdleExit, worksPerRun: ScopeListingListingsPerRun, what: "scope's listing"}

// ActivityDemandScopeListing hands a pool's ListingDemand to its scope's listing workflow,
// starting that workflow if it is not running (one signal-with-start).
const ActivityDemandScopeListing = "DemandScopeListing"

// ScopeListingInput starts (or continues) a scope's listing workflow.
type ScopeListingInput struct {
	Scope Scope `json:"scope"`
	// State is set only by the workflow itself when it continues as new.
	State *ScopeListingState `json:"state,omitempty"`
}

// ScopeListingResult is what the listing workflow returns when no pool has asked for a while.
type ScopeListingResult struct{}

// ListingDemand is what one pool asks of its scope's listing.
type ListingDemand struct {
	Pool string `json:"pool"`
	// Interval is how often the pool wants its runners listed at rest; zero withdraws the pool.
	Interval time.Duration `json:"interval"`
	// FastUntil: until then the pool wants the short interval (ScopeListingIntervalStarting),
	// because runners are registering and the listing is how they are seen online.
	FastUntil time.Time `json:"fastUntil,omitzero"`
	// Resend asks for the pool's runners with the next listing even if the workflow believes
	// the pool has them (a pool that has not heard from this scope yet, or a new pool of the
	// same name).
	Resend bool `json:"resend,omitempty"`
}

// DemandScopeListingInput is one pool's demand for one scope.
type DemandScopeListingInput struct {
	Scope  Scope         `json:"scope"`
	Demand ListingDemand `json:"demand"`
}

// DemandScopeListingResult is empty: the demand was delivered.
type DemandScopeListingResult struct{}

// ScopeListingSignal is one pool's part of a scope listing: the runners listed under the pool's
// name, sorted by name.
type ScopeListingSignal struct {
	Scope   Scope           `json:"scope"`
	At      time.Time       `json:"at"`
	Runners []RunnerListing `json:"runners,omitempty"`
}

// table is the state's table of pools, as servePools keeps it.
func (st *ScopeListingState) table() poolTable[ListingDemand, ScopeListingPool] {
	return poolTable[ListingDemand, ScopeListingPool]{pools: &st.Pools, idleSince: &st.IdleSince, record: RecordDemand}
}

// state is the state a run starts from: the one carried over, else a new one idle from now.
func (in ScopeListingInput) state(ctx workflow.Context) *ScopeListingState {
	if in.State != nil {
		return in.State
	}
	return &ScopeListingState{Scope: in.Scope, IdleSince: workflow.Now(ctx)}
}

// ScopeListingState is everything the listing workflow knows, carried across continue-as-new.
type ScopeListingState struct {
	Scope Scope `json:"scope"`
	// Pools are the pools asking, sorted by name.
	Pools []ScopeListingPool `json:"pools,omitempty"`
	// LastListing is when the last listing ended (listed or failed); LastError its error.
	LastListing time.Time `json:"lastListing,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	// Listings and Signals count this workflow's listings and signals to pools over its life.
	Listings int64 `json:"listings"`
	Signals  int64 `json:"signals"`
	// IdleSince is when the last pool withdrew (or the workflow started without one).
	IdleSince time.Time `json:"idleSince,omitzero"`
}

// ScopeListingPool is one pool's demand and what the workflow last sent it.
type ScopeListingPool struct {
	ListingDemand
	// Sent is the digest of the runners last sent to the pool ("" for none yet), SentAt when.
	Sent   string    `json:"sent,omitempty"`
	SentAt time.Time `json:"sentAt,omitzero"`
	// Listed is how many runners the pool had in the last listing.
	Listed int `json:"listed"`
}

func (p ScopeListingPool) poolName() string { return p.Pool }

func (p ScopeListingPool) told(digest string, at time.Time) ScopeListingPool {
	p.Sent, p.SentAt = digest, at
	return p
}

func (p ScopeListingPool) withdrawal() ListingDemand { return ListingDemand{Pool: p.Pool} }
