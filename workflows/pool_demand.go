package workflows

import "time"

// demandSource is how a pool learns what its runners are needed for, beyond its reservation
// book. Each run of a pool has one, chosen from its spec (chooseDemand):
//   - webhooksOnly (pool_webhooks.go): the reservations the scale windows make from webhooks
//     are the whole demand, and Decide counts them itself;
//   - pullDemand (pool_pull.go, pool_pull_shared.go): GitHub's queued and in-progress jobs,
//     read on the pool's timer or through the repositories' shared pull workflows, counted
//     with the reservations (DecidePull);
//   - scaleSetDemand (pool_scaleset.go): the runner scale set's messages and statistics,
//     handed over by the set's listener (ScaleSetDemand).
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

// runnerEnd is one of the pool's runners ending, with its final report.
type runnerEnd struct {
	runner PoolRunner
	report RunnerStateReport
}

// chooseDemand picks the run's source from the spec. A pool cannot become or stop being a
// scale set's (validateApply). A pool whose pull section was removed keeps the pull source
// while its state holds a pull to wind down: that source withdraws its shared demands, then
// wants nothing of its own. A webhook pool given a pull section takes it (followSpec).
func (p *pool) chooseDemand() demandSource {
	switch {
	case p.st.Spec.IsScaleSet():
		return newScaleSetDemand(p)
	case p.st.Spec.Pull != nil || p.st.Pull != nil:
		return newPullDemand(p)
	}
	return webhooksOnly{}
}

// followSpec takes the source an applied spec asks for when it gives a webhook pool a pull
// section; the pull source, once taken, serves the rest of the run (see chooseDemand).
func (p *pool) followSpec() {
	if _, webhooks := p.demand.(webhooksOnly); webhooks && p.st.Spec.Pull != nil {
		p.demand = newPullDemand(p)
	}
}

// receiveDemandNews installs the receivers of the sources' signals in every pool, whatever its
// source: receiving issues no command, and a signal that is not the source's still wakes the
// loop, as it always did. Their order is the order they were installed in before the sources
// were apart (the scale set's, then the shared pull's).
func (p *pool) receiveDemandNews() {
	receive(p, SignalScaleSetMessage, func(s ScaleSetMessageSignal) { p.demand.hear(s) })
	receive(p, SignalScaleSetListenerEnded, func(s ScaleSetListenerEnded) { p.demand.hear(s) })
	receive(p, SignalScaleSetSessionOpened, func(s ScaleSetSessionOpened) { p.demand.hear(s) })
	receive(p, SignalRepoPull, func(s RepoPullSignal) { p.demand.hear(s) })
}
