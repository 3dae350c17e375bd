package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// changeSharedListing gates the pool's runner listing moving to its scope's listing workflow
// (ScopeListingWorkflow): the pool no longer lists its scope itself every interval (every page
// of every runner of the organization, once per pool), it tells the scope's listing workflow
// what it wants (DemandScopeListing, when that changes) and applies the listings that workflow
// signals it (SignalScopeListing), which come only when its runners' status changed. Asked
// only once the pool has runners (where it used to list), so a pool without runners carries
// no marker; a run that began listing by itself keeps doing so until it continues as new.
const changeSharedListing = "shared-scope-listing"

// sharesListing reports whether this run takes its listings from the scope's listing workflow.
func (p *poolRun) sharesListing() bool {
	return workflow.GetVersion(p.ctx, changeSharedListing, workflow.DefaultVersion, 1) >= 1
}

// receiveScopeListing takes the listings the scope's listing workflow signals. A pool that does
// not share listings never gets one, so the receiver changes nothing in its history.
func (p *poolRun) receiveScopeListing() {
	receive(p, SignalScopeListing, p.onScopeListing)
}

// onScopeListing applies the pool's part of a scope listing as the pool applied its own
// listing: runners whose status changed are told, orphans are recorded. A listing of a scope the
// pool left, or older than one already applied, is ignored.
func (p *poolRun) onScopeListing(s ScopeListingSignal) {
	if s.Scope != p.st.Spec.Scope() {
		return
	}
	if last := p.st.LastListing; last != nil && s.At.Before(last.At) {
		return
	}
	p.applyListing(ListRunnersResult{Runners: s.Runners}, s.At)
}

// tendListingDemand tells the scope's listing workflow what the pool wants when that changed:
// listings at the rest interval while it has runners (none without), the short interval while
// runners register (asked for ScopeListingFastHold at a time), and its withdrawal from a
// scope it left. One demand at a time, beside the loop.
func (p *poolRun) tendListingDemand(now time.Time) {
	p.st.NextListing = time.Time{} // the scope's listing workflow decides when to list
	if p.listing {
		return
	}
	scope := p.st.Spec.Scope()
	cur := p.st.ListingDemand
	want := p.wantedDemand(now)
	var sends []DemandScopeListingInput
	if cur != nil && cur.Scope != scope {
		sends = append(sends, DemandScopeListingInput{Scope: cur.Scope, Demand: ListingDemand{Pool: p.st.Spec.Name}})
		cur = nil
	}
	switch {
	case cur == nil && want.Interval == 0:
	case cur == nil:
		want.Resend = true // a new pool of this name, or the first listing in this scope
		sends = append(sends, DemandScopeListingInput{Scope: scope, Demand: want})
	case cur.Interval != want.Interval || want.FastUntil.After(cur.FastUntil):
		sends = append(sends, DemandScopeListingInput{Scope: scope, Demand: want})
	}
	if len(sends) == 0 {
		return
	}
	p.listing = true // continue-as-new waits for the demand, as it waited for a listing
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.listing = false }()
		for _, in := range sends {
			if err := demandScopeListing(ctx, in); err != nil {
				// Only a refusal no retry changes ends the policy's retries: asked again when
				// something else changes, not in a loop.
				p.logger.Warn("Listing demand failed", "scope", in.Scope.String(), "error", err)
				return
			}
		}
		p.changed = true
		last := sends[len(sends)-1]
		if last.Demand.Interval == 0 {
			p.st.ListingDemand = nil
			return
		}
		p.st.ListingDemand = &PoolListingDemand{Scope: last.Scope, Interval: last.Demand.Interval, FastUntil: last.Demand.FastUntil}
	})
}

// wantedDemand is what the pool asks at now: the rest interval while it has runners, and the
// short interval for ScopeListingFastHold more when runners register and what it asked before
// lapses within ScopeListingFastRenew.
func (p *poolRun) wantedDemand(now time.Time) ListingDemand {
	d := ListingDemand{Pool: p.st.Spec.Name}
	if len(p.st.Runners) == 0 {
		return d
	}
	d.Interval = PoolListingInterval
	if cur := p.st.ListingDemand; cur != nil && cur.Scope == p.st.Spec.Scope() {
		d.FastUntil = cur.FastUntil
	}
	if p.registering() && !d.FastUntil.After(now.Add(ScopeListingFastRenew)) {
		d.FastUntil = now.Add(ScopeListingFastHold)
	}
	return d
}

// registering reports whether a runner of the pool is still to be seen online.
func (p *poolRun) registering() bool {
	return slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool {
		return r.State == RunnerPending || r.State == RunnerRegistering
	})
}

// listingDemandWake is when the pool must ask again for the short interval while runners still
// register; zero when it need not.
func (p *poolRun) listingDemandWake() time.Time {
	cur := p.st.ListingDemand
	if cur == nil || cur.FastUntil.IsZero() || !p.registering() {
		return time.Time{}
	}
	return cur.FastUntil.Add(-ScopeListingFastRenew)
}

func demandScopeListing(ctx workflow.Context, in DemandScopeListingInput) error {
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ListingDemandPolicy), ActivityDemandScopeListing, in).Get(ctx, nil)
}

// startListing lists the pool's runners at GitHub (one paginated call) when due, while the
// pool has runners. It runs beside the loop; its result is recorded like a signal.
//
// Since changeSharedListing the scope's listing workflow lists for every pool of the scope,
// and the pool only tells it what it wants (tendListingDemand).
func (p *poolRun) startListing(now time.Time) {
	if (len(p.st.Runners) > 0 || p.st.ListingDemand != nil) && p.sharesListing() {
		p.tendListingDemand(now)
		return
	}
	if p.listing || len(p.st.Runners) == 0 || now.Before(p.st.NextListing) {
		return
	}
	p.listing = true
	in := ListRunnersInput{Scope: p.st.Spec.Scope(), NamePrefix: p.st.Spec.Name + "-"}
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		res, err := listRunners(ctx, in)
		done := workflow.Now(ctx)
		p.listing = false
		p.changed = true
		p.st.NextListing = done.Add(p.listingInterval())
		if err != nil {
			p.logger.Warn("Runner listing failed", "error", err)
			p.st.LastListing = &ListRunnersResultBrief{At: done, Error: err.Error()}
			return
		}
		p.applyListing(res, done)
	})
}

// listingInterval is short while a runner is registering: the listing is how it is seen online.
func (p *poolRun) listingInterval() time.Duration {
	for _, r := range p.st.Runners {
		if r.State == RunnerPending || r.State == RunnerRegistering {
			return PoolListingIntervalStarting
		}
	}
	return PoolListingInterval
}

// changeListingTellsInBatches gates telling the runners what a listing found with one
// SignalRunnerStatuses activity instead of a signal each (see ActivitySignalRunnerStatuses).
const changeListingTellsInBatches = "listing-tells-in-batches"

// tellRunners hands each runner its status from a listing: since changeListingTellsInBatches
// with one activity per RunnerStartBatchSize runners, before it with a signal each. A runner
// whose workflow no longer exists is forgotten either way. Asked only when a listing tells
// some runner something, so a pool at rest carries no marker.
//
// Since the change, a busy ephemeral runner that the listing no longer has (jobOver) is not
// told: GitHub removes an ephemeral runner's registration when its job ends, which the runner
// learns from its job's completed notice and its pod's exit; told "gone" first, it would ask
// GitHub by its id to be sure (changeConfirmGone), one REST call a runner of every burst.
func (p *poolRun) tellRunners(updates []RunnerStatusUpdate, jobOver map[string]bool) {
	if len(updates) == 0 {
		return
	}
	if workflow.GetVersion(p.ctx, changeListingTellsInBatches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		for _, u := range updates {
			p.signal(u.Runner, SignalRunnerStatus, u.Status)
		}
		return
	}
	updates = slices.DeleteFunc(updates, func(u RunnerStatusUpdate) bool { return jobOver[u.Runner] })
	for chunk := range slices.Chunk(updates, RunnerStartBatchSize) {
		in := SignalRunnerStatusesInput{Pool: p.st.Spec.Name, Updates: chunk}
		p.inflight++
		workflow.Go(p.ctx, func(ctx workflow.Context) {
			out, err := runActivity[SignalRunnerStatusesInput, SignalRunnerStatusesOutput](ctx, RunnerStatusesPolicy, ActivitySignalRunnerStatuses, in)
			p.inflight--
			p.changed = true
			if err != nil {
				p.logger.Warn("Telling runners their listing failed", "runners", len(in.Updates), "error", err)
				return
			}
			for _, name := range out.Gone {
				p.forget(name, RunnerDone, "runner workflow ended without a report (not found when told its listing)")
			}
		})
	}
}

// applyListing signals each runner whose GitHub status changed since the last listing and
// records the orphans: runners with the pool's name that the pool does not track.
func (p *poolRun) applyListing(res ListRunnersResult, now time.Time) {
	listed := map[string]RunnerListing{}
	var ours []RunnerListing
	for _, l := range res.Runners {
		if pool, ok := PoolFromRunnerName(l.Name); ok && pool == p.st.Spec.Name {
			listed[l.Name] = l
			ours = append(ours, l)
		}
	}
	known := map[string]bool{}
	var tell []RunnerStatusUpdate
	var jobOver map[string]bool // runners whose gone registration is their job's end
	for i := range p.st.Runners {
		r := &p.st.Runners[i]
		known[r.Name] = true
		if r.Warm && !r.Started {
			// Registered before its workflow exists: a signal now would find no workflow (and
			// make the pool forget it); the next listing tells it.
			continue
		}
		l, ok := listed[r.Name]
		var status RunnerStatusSignal
		switch {
		case ok:
			status = RunnerStatusSignal{Online: l.Online, Busy: l.Busy}
		case r.Listed != nil:
			status = RunnerStatusSignal{Gone: true}
		default:
			continue // not registered yet
		}
		if r.Listed == nil || *r.Listed != status {
			r.Listed = &status
			if !p.lean || !status.toldBy(r.State) {
				tell = append(tell, RunnerStatusUpdate{Runner: r.Name, Status: status})
				if status.Gone && r.Busy && p.st.Spec.IsEphemeral() {
					if jobOver == nil {
						jobOver = map[string]bool{}
					}
					jobOver[r.Name] = true
				}
			}
		}
	}
	p.tellRunners(tell, jobOver)
	for _, f := range p.st.Finished {
		known[f.Name] = true // GitHub may list a runner for a moment after it ended
	}
	for _, w := range p.st.Warm {
		known[w.Name] = true // registered ahead, offline until a runner takes it
	}
	p.st.Orphans = orphans(ours, known, p.st.Orphans, now)
	p.st.LastListing = &ListRunnersResultBrief{At: now, Listed: len(ours)}
}

func orphans(listed []RunnerListing, known map[string]bool, before []Orphan, now time.Time) []Orphan {
	firstSeen := map[string]time.Time{}
	for _, o := range before {
		firstSeen[o.Name] = o.FirstSeen
	}
	var out []Orphan
	for _, l := range listed {
		if known[l.Name] {
			continue
		}
		seen, ok := firstSeen[l.Name]
		if !ok {
			seen = now
		}
		out = append(out, Orphan{Name: l.Name, ID: l.ID, Online: l.Online, Busy: l.Busy, FirstSeen: seen})
	}
	return out
}
