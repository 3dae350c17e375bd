package workflows

import (
	"errors"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The shared workflows that serve many pools (ScopeListingWorkflow, RepoPullWorkflow) take
// demands the same way and tell pools the same way; these helpers are that common part. Each
// issues exactly the commands the workflows issued before they shared it.

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

func (p RepoPullPool) poolName() string     { return p.Pool }
func (p ScopeListingPool) poolName() string { return p.Pool }

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
