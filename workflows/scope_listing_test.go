package workflows

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func TestSplitScopeListing(t *testing.T) {
	now := time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	runners := []RunnerListing{
		{Name: "a-b-abcd-1", ID: 3, Online: true},
		{Name: "a-abcd-2", ID: 2, Online: true, Busy: true},
		{Name: "a-abcd-1", ID: 1, Online: true},
		{Name: "c-abcd-1", ID: 4},
		{Name: "someone-elses-runner", ID: 5},
	}
	pools := []ScopeListingPool{{ListingDemand: ListingDemand{Pool: "a", Interval: time.Minute}}, {ListingDemand: ListingDemand{Pool: "a-b", Interval: time.Minute}}}
	sends := SplitScopeListing(pools, []string{"a", "a-b"}, runners, now)
	if len(sends) != 2 || sends[0].Pool != "a" || sends[1].Pool != "a-b" {
		t.Fatalf("sends %+v, want one to a and one to a-b", sends)
	}
	if names := listingNames(sends[0].Runners); !slices.Equal(names, []string{"a-abcd-1", "a-abcd-2"}) {
		t.Errorf("pool a got %v: want its own runners only, sorted (not a-b's)", names)
	}
	if names := listingNames(sends[1].Runners); !slices.Equal(names, []string{"a-b-abcd-1"}) {
		t.Errorf("pool a-b got %v", names)
	}
	if pools[0].Listed != 2 || pools[1].Listed != 1 {
		t.Errorf("listed counts %d, %d", pools[0].Listed, pools[1].Listed)
	}

	// What a pool was sent is not sent again, until it changes or is ResendAfter old.
	pools[0].Sent, pools[0].SentAt = sends[0].Digest, now
	pools[1].Sent, pools[1].SentAt = sends[1].Digest, now
	if again := SplitScopeListing(pools, []string{"a", "a-b"}, runners, now.Add(time.Minute)); len(again) != 0 {
		t.Errorf("unchanged listing sent again: %+v", again)
	}
	busy := slices.Clone(runners)
	busy[0].Busy = true
	if changed := SplitScopeListing(pools, []string{"a", "a-b"}, busy, now.Add(time.Minute)); len(changed) != 1 || changed[0].Pool != "a-b" {
		t.Errorf("a-b's runner turned busy: sends %+v, want a-b only", changed)
	}
	if gone := SplitScopeListing(pools, []string{"a", "a-b"}, runners[1:], now.Add(time.Minute)); len(gone) != 1 || gone[0].Pool != "a-b" || len(gone[0].Runners) != 0 {
		t.Errorf("a-b's runner gone: sends %+v, want a-b with no runners", gone)
	}
	if late := SplitScopeListing(pools, []string{"a"}, busy, now.Add(time.Minute)); len(late) != 0 {
		t.Errorf("a listing made before a-b asked told a-b %+v", late)
	}
	if resent := SplitScopeListing(pools, []string{"a", "a-b"}, runners, now.Add(ScopeListingResendAfter)); len(resent) != 2 {
		t.Errorf("after ScopeListingResendAfter: %d sends, want both pools", len(resent))
	}
}

func TestRecordDemandAndNextListing(t *testing.T) {
	now := time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	var pools []ScopeListingPool
	pools = RecordDemand(pools, ListingDemand{Pool: "b", Interval: PoolListingInterval})
	pools = RecordDemand(pools, ListingDemand{Pool: "a", Interval: PoolListingInterval, FastUntil: now.Add(time.Minute)})
	if pools[0].Pool != "a" || pools[1].Pool != "b" {
		t.Fatalf("pools %+v, want sorted by name", pools)
	}
	st := ScopeListingState{Pools: pools, LastListing: now}
	if got := NextScopeListing(st, now); !got.Equal(now.Add(ScopeListingIntervalStarting)) {
		t.Errorf("with a pool registering runners: next listing %v, want after the short interval", got.Sub(now))
	}
	if got := NextScopeListing(st, now.Add(time.Minute)); !got.Equal(now.Add(PoolListingInterval)) {
		t.Errorf("after its FastUntil: next listing %v, want after the rest interval", got.Sub(now))
	}
	pools[0].Sent = "x"
	pools = RecordDemand(pools, ListingDemand{Pool: "a", Interval: PoolListingInterval, Resend: true})
	if pools[0].Sent != "" || !pools[0].FastUntil.IsZero() {
		t.Errorf("a Resend demand keeps %+v", pools[0])
	}
	pools = RecordDemand(pools, ListingDemand{Pool: "a"})
	pools = RecordDemand(pools, ListingDemand{Pool: "b"})
	if len(pools) != 0 || !NextScopeListing(ScopeListingState{Pools: pools, LastListing: now}, now).IsZero() {
		t.Errorf("withdrawn pools left %+v", pools)
	}
}

func listingNames(rs []RunnerListing) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// fakeScopeGitHub plays GitHub's runner listing of one organization for the listing workflow.
type fakeScopeGitHub struct {
	mu      sync.Mutex
	runners []RunnerListing
	calls   []ListRunnersInput
	at      []time.Time
	now     func() time.Time
}

func (g *fakeScopeGitHub) list(_ context.Context, in ListRunnersInput) (ListRunnersResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, in)
	g.at = append(g.at, g.now())
	var out ListRunnersResult
	for _, r := range g.runners {
		if in.Keeps(r.Name) {
			out.Runners = append(out.Runners, r)
		}
	}
	return out, nil
}

func (g *fakeScopeGitHub) set(name string, busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.runners {
		if g.runners[i].Name == name {
			g.runners[i].Busy = busy
		}
	}
}

// Two pools of one organization share one listing per interval: each hears only its own
// runners, only when they change; a pool that no longer exists is dropped; with no pool asking,
// the workflow ends after ScopeListingIdleExit. Run with and without continue-as-new.
func TestScopeListingWorkflowSharesOneListing(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	org := Scope{Organization: "acme"}
	start := time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ScopeListingWorkflowID(org)})
	gh := &fakeScopeGitHub{now: env.Now, runners: []RunnerListing{
		{Name: "a-abcd-1", ID: 1, Online: true}, {Name: "a-abcd-2", ID: 2, Online: true},
		{Name: "b-abcd-1", ID: 3, Online: true}, {Name: "b-zzzz-9", ID: 4}, // b's orphan
		{Name: "c-abcd-1", ID: 5, Online: true}, {Name: "not-runnerflow", ID: 6},
	}}
	env.RegisterWorkflowWithOptions(ScopeListingWorkflow, workflow.RegisterOptions{Name: ScopeListingWorkflowType})
	env.RegisterActivityWithOptions(gh.list, activity.RegisterOptions{Name: ActivityListRunners})
	var mu sync.Mutex
	told := map[string][]ScopeListingSignal{}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalScopeListing, mock.Anything).Return(
		func(_, workflowID, _, _ string, arg any) error {
			if workflowID == PoolWorkflowID("c") {
				return &temporal.UnknownExternalWorkflowExecutionError{}
			}
			mu.Lock()
			defer mu.Unlock()
			told[workflowID] = append(told[workflowID], arg.(ScopeListingSignal))
			return nil
		})
	demand := func(at time.Duration, d ListingDemand) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalListingDemand, d) }, at)
	}
	demand(time.Second, ListingDemand{Pool: "a", Interval: PoolListingInterval, FastUntil: start.Add(2 * time.Minute), Resend: true})
	demand(time.Second, ListingDemand{Pool: "b", Interval: PoolListingInterval, Resend: true})
	demand(time.Second, ListingDemand{Pool: "c", Interval: PoolListingInterval, Resend: true})
	env.RegisterDelayedCallback(func() { gh.set("a-abcd-2", true) }, 40*time.Second)
	demand(10*time.Minute, ListingDemand{Pool: "a"})
	demand(10*time.Minute, ListingDemand{Pool: "b"})
	env.SetTestTimeout(time.Minute)
	env.ExecuteWorkflow(ScopeListingWorkflowType, ScopeListingInput{Scope: org})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v: want the workflow to end once no pool asks", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}

	// One listing per interval for the whole scope: 15 s while a registers (to 2 min), then 2 min.
	for i := 1; i < len(gh.at); i++ {
		gap := gh.at[i].Sub(gh.at[i-1])
		want := PoolListingInterval
		if gh.at[i-1].Before(start.Add(2 * time.Minute)) {
			want = ScopeListingIntervalStarting
		}
		if gap < want {
			t.Errorf("listing %d came %v after the one before, want at least %v", i, gap, want)
		}
	}
	if n := len(gh.calls); n < 8 || n > 14 {
		t.Errorf("%d listings in 10 minutes, want 8 at 15 s for 2 minutes and about 4 at 2 minutes", n)
	}
	for i, in := range gh.calls {
		if i > 1 && slices.Contains(in.NamePrefixes, "c-") {
			t.Errorf("listing %d still lists for pool c, whose workflow does not exist", i)
		}
		// The first demand is listed at once; the others that came with it from the next listing on.
		if i > 0 && (!slices.Contains(in.NamePrefixes, "a-") || !slices.Contains(in.NamePrefixes, "b-")) {
			t.Errorf("listing %d filters %v: one listing serves both pools", i, in.NamePrefixes)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	a, b := told[PoolWorkflowID("a")], told[PoolWorkflowID("b")]
	if len(a) != 2 || len(b) != 1 {
		t.Fatalf("a told %d times, b %d: want a twice (first listing, its runner busy) and b once", len(a), len(b))
	}
	if names := listingNames(a[0].Runners); !slices.Equal(names, []string{"a-abcd-1", "a-abcd-2"}) || !a[1].Runners[1].Busy {
		t.Errorf("a was told %v then %+v", names, a[1].Runners)
	}
	if names := listingNames(b[0].Runners); !slices.Equal(names, []string{"b-abcd-1", "b-zzzz-9"}) {
		t.Errorf("b was told %v: its runners and its orphan", names)
	}
}

// The pool asks its scope's listing workflow for listings while it has runners (the short
// interval while they register), applies what it is told (runners online, orphans), and
// withdraws when it has none; across continue-as-new at every few iterations too.
func TestPoolTakesItsListingFromTheScope(t *testing.T) {
	for _, canAfter := range []int{0, 1, 2, 5} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) { poolTakesItsListingFromTheScope(t, canAfter) })
	}
}

func poolTakesItsListingFromTheScope(t *testing.T, canAfter int) {
	h := newPoolHarness(t, canAfter)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas = 2, ptr(4)
	h.at(time.Minute, func() { h.addOrphan(RunnerListing{Name: "linux-zzzz-1", ID: 9, Online: true}) })
	h.check(3*time.Minute, "two idle runners and the orphan from the scope's listing", func(st PoolStatus) bool {
		return countState(st, RunnerIdle, st.TemplateHash) == 2 && len(st.Orphans) == 1 && st.Orphans[0].Name == "linux-zzzz-1" &&
			st.Listing != nil && st.Listing.Listed == 3
	})
	h.at(5*time.Minute, func() { h.update("zero", UpdateScale, ScaleRequest{Min: ptr(0), Max: ptr(0)}) })
	end := h.run(spec, 10*time.Minute)
	if len(end.Runners) != 0 {
		t.Errorf("%d runners left", len(end.Runners))
	}
	demands := h.listingSim().demands
	if len(demands) < 2 {
		t.Fatalf("demands %+v, want a first one and a withdrawal", demands)
	}
	first, last := demands[0].Demand, demands[len(demands)-1].Demand
	if demands[0].Scope != spec.Scope() || first.Pool != "linux" || !first.Resend || first.Interval != PoolListingInterval || first.FastUntil.IsZero() {
		t.Errorf("first demand %+v", demands[0])
	}
	if last.Interval != 0 {
		t.Errorf("last demand %+v, want the withdrawal", last)
	}
	if len(demands) > 4 {
		t.Errorf("%d demands for one scale-up and one scale-down: %+v", len(demands), demands)
	}
}

// A pool run that began before changeSharedListing keeps listing its scope itself, as it did:
// it asks the scope's listing workflow for nothing, and still sees its runners and orphans.
func TestPoolBeforeSharedListingListsItself(t *testing.T) {
	h := newPoolHarness(t, 0)
	h.onSegment = func() {
		h.env.OnGetVersion(changeSharedListing, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	spec := poolTestSpec()
	spec.MinReplicas = 2
	h.at(time.Minute, func() { h.addOrphan(RunnerListing{Name: "linux-zzzz-1", ID: 9, Online: true}) })
	h.check(4*time.Minute, "two idle runners and the orphan from the pool's own listing", func(st PoolStatus) bool {
		return countState(st, RunnerIdle, st.TemplateHash) == 2 && len(st.Orphans) == 1
	})
	h.run(spec, 5*time.Minute)
	if d := h.listingSim().demands; len(d) != 0 {
		t.Errorf("a pool listing for itself asked the scope's listing workflow %+v", d)
	}
}
