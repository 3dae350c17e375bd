package workflows

import "time"

// demandSource is how a pool learns what its runners are needed for, beyond its reservation
// book. Each run of a pool has one, chosen from its spec (chooseDemand):
//   - webhooksOnly (pool_webhooks.go): the reservations the scale windows make from webhooks
//     are the whole demand, and Decide counts them itself;
//   - pullDemand (pool_pull.go, pool_pull_shared.go): GitHub's queued and in-progress jobs,
//     read on the pool's timer or through the repositories' shared pull workflows, counted
//     with the reservations (DecidePull);
//   - scaleSetDemand (pool_scaleset.go, pool_scaleset_set.go): the runner scale set's
//     messages and statistics, handed over by the set's listener (ScaleSetDemand).
//
// The loop asks whichever it is the same things, in the same places: tend before the decision,
// want for it, wake and busy before it waits or continues as new, status for QueryStatus.
type demandSource interface {
	// hear takes news the pool was given that may concern its demand; news of another
	// source's is ignored.
	hear(news demandNews)
	// tend does the source's periodic work, before the decision (a read, demands to the
	// shared reads, the set's upkeep); it starts work beside the loop and never waits for it.
	tend(now time.Time)
	// want is the source's Demand for Decide; nil when the reservations are the demand.
	want(now time.Time) *Demand
	// wake is when the source next has something due without any signal (zero: nothing).
	wake(now time.Time) time.Time
	// busy is true while the source's work runs beside the loop: continue-as-new waits.
	busy() bool
	// status fills the source's part of the pool's status.
	status(out *PoolStatus)
}

// demandNews is what a pool hears that a source of demand may count: the signals of the
// sources' own workflows, and the end of one of the pool's runners (runnerEnd).
type demandNews interface{ isDemandNews() }

func (RepoPullSignal) isDemandNews()        {}
func (ScaleSetMessageSignal) isDemandNews() {}
func (ScaleSetListenerEnded) isDemandNews() {}
func (ScaleSetSessionOpened) isDemandNews() {}
func (runnerEnd) isDemandNews()             {}

// runnerEnd is one of the pool's runners ending: the runner as the pool last knew it, and its
// final report.
type runnerEnd struct {
	last   PoolRunner
	report RunnerStateReport
}
