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
	logger := log.With(workflow.GetLogger(ctx), "scope", in.Scope.String())
	var server poolServer[ListingDemand, ScopeListingPool] = in.state(ctx)
	return ScopeListingResult{}, servePools(ctx, logger, server, scopeListingServing)
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
	return nextWork(st.Pools, st.LastListing, func(p ScopeListingPool) time.Duration { return p.interval(now) })
}

func (st *ScopeListingState) due(now time.Time) time.Time { return NextScopeListing(*st, now) }

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

// work lists the scope once and returns what concerns each pool, to tell it.
func (st *ScopeListingState) work(ctx workflow.Context, logger log.Logger) []poolPart {
	in := ListRunnersInput{Scope: st.Scope}
	var asked []string
	for _, p := range st.Pools {
		asked = append(asked, p.Pool)
		in.NamePrefixes = append(in.NamePrefixes, p.Pool+"-")
	}
	var res ListRunnersResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ScopeListingPolicy), ActivityListRunners, in).Get(ctx, &res)
	now := workflow.Now(ctx)
	st.LastListing, st.LastError = now, ""
	st.Listings++
	if err != nil {
		st.LastError = err.Error()
		logger.Warn("Scope runner listing failed", "error", err)
		return nil
	}
	sends := SplitScopeListing(st.Pools, asked, res.Runners, now)
	parts := make([]poolPart, len(sends))
	for i, s := range sends {
		parts[i] = poolPart{Pool: s.Pool, Digest: s.Digest, Arg: ScopeListingSignal{Scope: st.Scope, At: now, Runners: s.Runners}}
	}
	st.Signals += int64(len(parts))
	return parts
}

// continueAsNew hands the state to the workflow's next run.
func (st *ScopeListingState) continueAsNew(ctx workflow.Context) error {
	next := *st
	return workflow.NewContinueAsNewError(onDecisionQueue(ctx, askListingDecidesApart), ScopeListingWorkflowType, ScopeListingInput{Scope: st.Scope, State: &next})
}
