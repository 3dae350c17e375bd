package workflows

import (
	"errors"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The shared workflows that serve many pools (ScopeListingWorkflow, RepoPullWorkflow) run one
// loop (servePools): they take demands the same way, work (a listing, a read) at the shortest
// interval asked, tell pools the same way, end when no pool asks and continue as new alike.
// Each issues exactly the commands the workflows issued before they shared it.

// poolServer is a shared workflow's state with its work, as the loop sees it; it answers
// QueryStatus.
type poolServer[D any, P servedPool[D, P]] interface {
	// table is the state's table of the pools asking.
	table() poolTable[D, P]
	// due is when the work is next due at now; zero when no pool asks.
	due(now time.Time) time.Time
	// work does it once and returns the parts to tell the pools (counted as signals).
	work(ctx workflow.Context, logger log.Logger) []poolPart
	// continueAsNew is the error that hands the state to the next run.
	continueAsNew(ctx workflow.Context) error
}

// poolTable is a shared workflow's table of the pools asking (D is their demand, P their
// entry), kept in its state.
type poolTable[D any, P servedPool[D, P]] struct {
	pools     *[]P
	idleSince *time.Time
	// record applies one pool's demand to the table (RecordDemand, RecordPullDemand).
	record func([]P, D) []P
}

// take applies one pool's demand; a table left empty is idle from now.
func (t poolTable[D, P]) take(ctx workflow.Context, d D) {
	*t.pools = t.record(*t.pools, d)
	if len(*t.pools) == 0 {
		*t.idleSince = workflow.Now(ctx)
	}
}

func (t poolTable[D, P]) find(pool string) int {
	return slices.IndexFunc(*t.pools, func(p P) bool { return p.poolName() == pool })
}

// poolPart is one pool's part of a piece of work, to be signalled: Digest names it, Arg is the
// signal's argument.
type poolPart struct {
	Pool   string
	Digest string
	Arg    any
}

// serving is how a shared workflow serves its pools.
type serving struct {
	// demandSignal is the signal pools ask by, partSignal the one that tells a pool its part.
	demandSignal, partSignal string
	// idleExit is how long the workflow waits with no pool asking before it ends; worksPerRun
	// how many works a run does before it continues as new.
	idleExit    time.Duration
	worksPerRun int
	// what the pools are served, for the logs ("scope's listing").
	what string
}

// servePools is a shared workflow's run: it records demands as they arrive, works when the
// work is due and tells the pools their parts, ends once no pool has asked for idleExit (the
// next demand starts a new run), and continues as new when the server suggests it or after
// worksPerRun works, taking the demands still queued first.
func servePools[D any, P servedPool[D, P]](ctx workflow.Context, logger log.Logger, server poolServer[D, P], how serving) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (poolServer[D, P], error) { return server, nil }); err != nil {
		return err
	}
	table := server.table()
	s := &poolService[D, P]{ctx: ctx, logger: logger, table: table, how: how}
	s.demands = listenForDemands(ctx, how.demandSignal, s.record)
	for {
		now := workflow.Now(ctx)
		s.changed = false
		idleUntil := table.idleSince.Add(how.idleExit)
		if due := server.due(now); !due.IsZero() && !now.Before(due) {
			parts := server.work(ctx, logger)
			s.works++
			s.tell(parts)
			continue
		}
		if len(*table.pools) == 0 && !now.Before(idleUntil) {
			if !s.demands.drain() {
				return nil
			}
			continue
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || s.works >= how.worksPerRun {
			s.demands.drain()
			return server.continueAsNew(ctx)
		}
		wake := server.due(now)
		if len(*table.pools) == 0 {
			wake = idleUntil
		}
		if err := awaitWake(ctx, now, wake, func() bool { return s.changed }); err != nil {
			return err
		}
	}
}

// poolService is one run of servePools.
type poolService[D any, P servedPool[D, P]] struct {
	ctx     workflow.Context
	logger  log.Logger
	table   poolTable[D, P]
	how     serving
	changed bool
	demands demandSignals[D]
	works   int
}

func (s *poolService[D, P]) record(d D) {
	s.table.take(s.ctx, d)
	s.changed = true
}

// tell signals each pool its part, all at once, and drops the pools that no longer exist.
func (s *poolService[D, P]) tell(parts []poolPart) {
	now := workflow.Now(s.ctx)
	signals := make([]poolSignal, len(parts))
	for i, part := range parts {
		signals[i] = poolSignal{Pool: part.Pool, Arg: part.Arg}
	}
	signalPools(s.ctx, s.how.partSignal, signals, func(i int, err error) {
		pools := *s.table.pools
		j := s.table.find(parts[i].Pool)
		switch {
		case j < 0: // withdrew meanwhile
		case poolGone(err):
			s.logger.Info("Pool no longer exists; dropped from the "+s.how.what, "pool", parts[i].Pool)
			s.record(pools[j].withdrawal())
		case err != nil:
			s.logger.Warn("Signal to pool failed", "signal", s.how.partSignal, "pool", parts[i].Pool, "error", err)
		default:
			pools[j] = pools[j].told(parts[i].Digest, now)
		}
	})
}

// demandSignals is a shared workflow's demand signal: a coroutine records each demand as it
// arrives, and drain records those still queued before a run ends or continues as new.
type demandSignals[D any] struct {
	ch     workflow.ReceiveChannel
	record func(D)
}

// listenForDemands records every demand of the signal named as it arrives.
func listenForDemands[D any](ctx workflow.Context, signal string, record func(D)) demandSignals[D] {
	s := demandSignals[D]{ch: workflow.GetSignalChannel(ctx, signal), record: record}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var d D
			s.ch.Receive(ctx, &d)
			s.record(d)
		}
	})
	return s
}

// drain records the demands still queued and reports whether there were any.
func (s demandSignals[D]) drain() bool {
	got := false
	for {
		var d D
		if !s.ch.ReceiveAsync(&d) {
			return got
		}
		s.record(d)
		got = true
	}
}

// awaitWake blocks until woken says so or wake comes (at least a second from now, so a wake
// already past does not spin).
func awaitWake(ctx workflow.Context, now, wake time.Time, woken func() bool) error {
	_, err := workflow.AwaitWithTimeout(ctx, max(wake.Sub(now), time.Second), woken)
	return err
}

// sharedPool is an entry of a shared workflow's table of the pools asking it.
type sharedPool interface {
	poolName() string
}

// servedPool is an entry (P) of a table the loop serves, whose pools ask with D.
type servedPool[D, P any] interface {
	sharedPool
	// told is the entry once its pool was told the part digest names, at at.
	told(digest string, at time.Time) P
	// withdrawal is the demand that takes the pool off the table.
	withdrawal() D
}

// applyDemand is the part of a pool's demand both shared workflows take alike, on a table kept
// in pool-name order: a withdrawal (interval zero) removes the pool, a new pool is added as
// entry. It returns the pool's existing entry for the caller to update, nil when there is none.
func applyDemand[P sharedPool](pools []P, entry P, interval time.Duration) ([]P, *P) {
	i := slices.IndexFunc(pools, func(p P) bool { return p.poolName() == entry.poolName() })
	switch {
	case interval <= 0 && i >= 0:
		return slices.Delete(pools, i, i+1), nil
	case interval <= 0:
		return pools, nil
	case i < 0:
		pools = append(pools, entry)
		slices.SortFunc(pools, func(a, b P) int { return strings.Compare(a.poolName(), b.poolName()) })
		return pools, nil
	}
	return pools, &pools[i]
}

// nextWork is when a shared workflow works next: the last work plus the shortest interval its
// pools ask now (interval gives a pool's; zero: none); zero when no pool asks.
func nextWork[P any](pools []P, last time.Time, interval func(P) time.Duration) time.Time {
	var shortest time.Duration
	for _, p := range pools {
		if d := interval(p); d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return time.Time{}
	}
	return last.Add(shortest)
}

// poolSignal is one signal to a pool's workflow.
type poolSignal struct {
	Pool string
	Arg  any
}

// signalPools sends every signal at once, then waits for each in turn and hands its outcome
// to settled (nil when delivered) before waiting for the next.
func signalPools(ctx workflow.Context, signal string, sends []poolSignal, settled func(i int, err error)) {
	futures := make([]workflow.Future, len(sends))
	for i, s := range sends {
		futures[i] = workflow.SignalExternalWorkflow(ctx, PoolWorkflowID(s.Pool), "", signal, s.Arg)
	}
	for i, f := range futures {
		settled(i, f.Get(ctx, nil))
	}
}

// poolGone says a signal failed because its pool's workflow no longer exists.
func poolGone(err error) bool {
	var gone *temporal.UnknownExternalWorkflowExecutionError
	return errors.As(err, &gone)
}
