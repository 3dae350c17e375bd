package workflows

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
)

// scopeListingSim plays a scope's listing workflow for the pool harness: it records the pool's
// demands and, while the pool asks, lists the harness's GitHub at the interval asked and
// signals the pool its runners when they changed, as ScopeListingWorkflow does.
type scopeListingSim struct {
	mu      sync.Mutex
	demands []DemandScopeListingInput
	scope   Scope
	pool    *ScopeListingPool
	last    time.Time
	ticking bool
}

// scopeListingSims holds each harness's stand-in (the harness struct is shared with other tests).
var scopeListingSims sync.Map

func (h *poolHarness) listingSim() *scopeListingSim {
	v, _ := scopeListingSims.LoadOrStore(h, &scopeListingSim{})
	return v.(*scopeListingSim)
}

// playScopeListing registers the stand-in's DemandScopeListing with a run's environment.
func (h *poolHarness) playScopeListing(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(h.demandScopeListing, activity.RegisterOptions{Name: ActivityDemandScopeListing})
}

func (h *poolHarness) demandScopeListing(_ context.Context, in DemandScopeListingInput) (DemandScopeListingResult, error) {
	s := h.listingSim()
	s.mu.Lock()
	s.demands = append(s.demands, in)
	var pools []ScopeListingPool
	if s.pool != nil {
		pools = []ScopeListingPool{*s.pool}
	}
	pools = RecordDemand(pools, in.Demand)
	s.pool, s.scope = nil, in.Scope
	if len(pools) == 1 {
		s.pool = &pools[0]
	}
	start := s.pool != nil && !s.ticking
	s.ticking = s.ticking || start
	s.mu.Unlock()
	if start {
		h.after(time.Second, h.tickScopeListing)
	}
	return DemandScopeListingResult{}, nil
}

// tickScopeListing lists when due and tells the pool what changed; it stops when the pool
// withdrew.
func (h *poolHarness) tickScopeListing() {
	s := h.listingSim()
	now := h.env.Now()
	s.mu.Lock()
	if s.pool == nil {
		s.ticking = false
		s.mu.Unlock()
		return
	}
	due := NextScopeListing(ScopeListingState{Pools: []ScopeListingPool{*s.pool}, LastListing: s.last}, now)
	var sends []PoolListingSend
	if !now.Before(due) {
		s.mu.Unlock()
		res, _ := h.listRunners(context.Background(), ListRunnersInput{NamePrefix: s.pool.Pool + "-"})
		s.mu.Lock()
		pools := []ScopeListingPool{*s.pool}
		sends = SplitScopeListing(pools, []string{pools[0].Pool}, res.Runners, now)
		s.last = now
		for _, snd := range sends {
			pools[0].Sent, pools[0].SentAt = snd.Digest, now
		}
		*s.pool = pools[0]
	}
	scope := s.scope
	s.mu.Unlock()
	for _, snd := range sends {
		h.signal(SignalScopeListing, ScopeListingSignal{Scope: scope, At: now, Runners: snd.Runners})
	}
	h.after(5*time.Second, h.tickScopeListing)
}
