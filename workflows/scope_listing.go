package workflows

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// ScopeListingWorkflow lists one GitHub scope's runners for every pool of that scope: one
// paginated listing per interval, however many pools share the scope, where each pool used to
// list every page itself (50 pools of one organization made 50 listings of the same runners).
//
// Pools ask for listings (SignalListingDemand, through the DemandScopeListing activity's
// signal-with-start): the interval a pool wants at rest, and until when it wants the short one
// because its runners are registering. The workflow lists at the shortest interval any pool
// wants, splits the listing by runner name, and signals each pool (SignalScopeListing) only
// its own runners, and only when they differ from what it last sent that pool (or that was
// ScopeListingResendAfter ago): a pool whose runners did not change hears nothing and does not
// wake. A pool that no longer exists (the signal finds no workflow) is dropped. With no pool
// asking for ScopeListingIdleExit the workflow ends; the next demand starts it again.
//
// Handlers only record demands; the loop lists, signals, and continues as new when the server
// suggests it or after ScopeListingListingsPerRun listings, carrying ScopeListingState.
func ScopeListingWorkflow(ctx workflow.Context, in ScopeListingInput) (ScopeListingResult, error) {
	l := &scopeListing{ctx: ctx, logger: log.With(workflow.GetLogger(ctx), "scope", in.Scope.String())}
	if in.State != nil {
		l.st = *in.State
	} else {
		l.st = ScopeListingState{Scope: in.Scope, IdleSince: workflow.Now(ctx)}
	}
	return ScopeListingResult{}, l.run()
}

// ScopeListingWorkflowType is the scope listing workflow's registered name.
const ScopeListingWorkflowType = "scope-listing"

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

// interval is the pool's wanted interval at now.
func (p ScopeListingPool) interval(now time.Time) time.Duration {
	if now.Before(p.FastUntil) {
		return min(p.Interval, ScopeListingIntervalStarting)
	}
	return p.Interval
}

// NextScopeListing is when the scope is next listed: the last listing plus the shortest
// interval any pool wants now; zero when no pool asks.
func NextScopeListing(st ScopeListingState, now time.Time) time.Time {
	var shortest time.Duration
	for _, p := range st.Pools {
		if d := p.interval(now); d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return time.Time{}
	}
	return st.LastListing.Add(shortest)
}

// RecordDemand applies one pool's demand to the table: a withdrawal removes the pool, a new
// pool or a Resend makes the next listing reach it whatever it holds.
func RecordDemand(pools []ScopeListingPool, d ListingDemand) []ScopeListingPool {
	pools, p := applyDemand(pools, ScopeListingPool{ListingDemand: d}, d.Interval)
	if p == nil {
		return pools
	}
	p.ListingDemand.Interval, p.ListingDemand.FastUntil = d.Interval, d.FastUntil
	if d.Resend {
		p.Sent = ""
	}
	return pools
}

// PoolListingSend is one pool's part of a listing that must be signalled to it.
type PoolListingSend struct {
	Pool    string
	Digest  string
	Runners []RunnerListing
}

// SplitScopeListing gives each pool the listing was made for (asked: a pool that asked while
// it ran was filtered out of it, and must not be told it has no runners) the runners listed
// under its name, and says which pools must be told: those whose runners differ from what they
// were last sent, and those last told ScopeListingResendAfter ago or more. It updates each
// pool's Listed count.
func SplitScopeListing(pools []ScopeListingPool, asked []string, runners []RunnerListing, now time.Time) []PoolListingSend {
	byPool := map[string][]RunnerListing{}
	for _, r := range runners {
		if pool, ok := PoolFromRunnerName(r.Name); ok {
			byPool[pool] = append(byPool[pool], r)
		}
	}
	var out []PoolListingSend
	for i := range pools {
		p := &pools[i]
		if !slices.Contains(asked, p.Pool) {
			continue
		}
		mine := byPool[p.Pool]
		slices.SortFunc(mine, func(a, b RunnerListing) int { return strings.Compare(a.Name, b.Name) })
		p.Listed = len(mine)
		digest := listingDigest(mine)
		if digest != p.Sent || !now.Before(p.SentAt.Add(ScopeListingResendAfter)) {
			out = append(out, PoolListingSend{Pool: p.Pool, Digest: digest, Runners: mine})
		}
	}
	return out
}

// listingDigest names a pool's part of a listing: the same runners with the same status give
// the same digest. Never "" (which means nothing sent).
func listingDigest(runners []RunnerListing) string {
	h := fnv.New64a()
	for _, r := range runners {
		_, _ = h.Write([]byte(r.Name + "\x00" + strconv.FormatInt(r.ID, 10) + "\x00" +
			strconv.FormatBool(r.Online) + strconv.FormatBool(r.Busy) + "\x00"))
	}
	return strconv.Itoa(len(runners)) + ":" + strconv.FormatUint(h.Sum64(), 16)
}

// scopeListing is one run of a scope's listing workflow.
type scopeListing struct {
	ctx     workflow.Context
	st      ScopeListingState
	logger  log.Logger
	changed bool
	demands demandSignals[ListingDemand]
	runs    int
}

func (l *scopeListing) run() error {
	if err := workflow.SetQueryHandler(l.ctx, QueryStatus, func() (ScopeListingState, error) { return l.st, nil }); err != nil {
		return err
	}
	l.demands = listenForDemands(l.ctx, SignalListingDemand, l.record)
	for {
		now := workflow.Now(l.ctx)
		l.changed = false
		if due := NextScopeListing(l.st, now); !due.IsZero() && !now.Before(due) {
			l.list()
			continue
		}
		if len(l.st.Pools) == 0 && !now.Before(l.st.IdleSince.Add(ScopeListingIdleExit)) {
			if !l.demands.drain() {
				return nil // no pool asked for a while: the next demand starts a new run
			}
			continue
		}
		if workflow.GetInfo(l.ctx).GetContinueAsNewSuggested() || l.runs >= ScopeListingListingsPerRun {
			l.demands.drain()
			st := l.st
			return workflow.NewContinueAsNewError(l.ctx, ScopeListingWorkflowType, ScopeListingInput{Scope: st.Scope, State: &st})
		}
		if err := l.wait(now); err != nil {
			return err
		}
	}
}

// record applies one demand.
func (l *scopeListing) record(d ListingDemand) {
	l.st.Pools = RecordDemand(l.st.Pools, d)
	if len(l.st.Pools) == 0 {
		l.st.IdleSince = workflow.Now(l.ctx)
	}
	l.changed = true
}

// wait blocks until a demand arrives or the next listing (or the idle exit) is due.
func (l *scopeListing) wait(now time.Time) error {
	wake := NextScopeListing(l.st, now)
	if len(l.st.Pools) == 0 {
		wake = l.st.IdleSince.Add(ScopeListingIdleExit)
	}
	return awaitWake(l.ctx, now, wake, func() bool { return l.changed })
}

// list lists the scope once and tells each pool what concerns it.
func (l *scopeListing) list() {
	in := ListRunnersInput{Scope: l.st.Scope}
	var asked []string
	for _, p := range l.st.Pools {
		asked = append(asked, p.Pool)
		in.NamePrefixes = append(in.NamePrefixes, p.Pool+"-")
	}
	var res ListRunnersResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(l.ctx, ScopeListingPolicy), ActivityListRunners, in).Get(l.ctx, &res)
	now := workflow.Now(l.ctx)
	l.st.LastListing, l.st.LastError = now, ""
	l.st.Listings++
	l.runs++
	if err != nil {
		l.st.LastError = err.Error()
		l.logger.Warn("Scope runner listing failed", "error", err)
		return
	}
	l.tell(SplitScopeListing(l.st.Pools, asked, res.Runners, now), now)
}

// tell signals each pool its part, all at once, and drops the pools that no longer exist.
func (l *scopeListing) tell(sends []PoolListingSend, now time.Time) {
	signals := make([]poolSignal, len(sends))
	for i, s := range sends {
		signals[i] = poolSignal{Pool: s.Pool, Arg: ScopeListingSignal{Scope: l.st.Scope, At: now, Runners: s.Runners}}
	}
	l.st.Signals += int64(len(sends))
	signalPools(l.ctx, SignalScopeListing, signals, func(i int, err error) {
		j := slices.IndexFunc(l.st.Pools, func(p ScopeListingPool) bool { return p.Pool == sends[i].Pool })
		switch {
		case j < 0: // withdrew meanwhile
		case poolGone(err):
			l.logger.Info("Pool no longer exists; dropped from the scope's listing", "pool", sends[i].Pool)
			l.record(ListingDemand{Pool: sends[i].Pool})
		case err != nil:
			l.logger.Warn("Listing signal to pool failed", "pool", sends[i].Pool, "error", err)
		default:
			l.st.Pools[j].Sent, l.st.Pools[j].SentAt = sends[i].Digest, now
		}
	})
}
