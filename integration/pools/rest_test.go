package pools

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// A pool at rest (its one runner idle, none registering) keeps checking for runner workflows
// that ended without a report, at the at-rest interval: two checks that far apart. Its history
// is the replay test's pool at rest, which the listing's short interval during registration
// never shows.
func TestPoolAtRestChecksForEndedRunners(t *testing.T) {
	t.Parallel()
	p := newPoolTest(t, "rest")
	p.apply(p.spec(1, 1, ""))
	p.eventually(wait, "an idle runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 1 })
	waitFor(t, workflows.PoolRunnerCheckInterval+wait, "two checks at rest", func() bool {
		return p.longestCheckGap() >= workflows.PoolRunnerCheckInterval
	})
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-rest")
		// The scope's listing workflow at rest, since changeSharedListing.
		recordHistory(t, workflows.ScopeListingWorkflowID(workflows.Scope{Organization: p.org}), "", "scope-listing-rest")
	}
}

// A pool at rest holds a reservation for a job its idle runner never takes (the job's later
// events lost; here a job GitHub does not know): its history is the replay test's reservation
// that no runner serves while a runner stands idle.
func TestPoolAtRestHoldsAReservationNoRunnerTakes(t *testing.T) {
	t.Parallel()
	p := newPoolTest(t, "held")
	p.apply(p.spec(1, 1, ""))
	p.eventually(wait, "an idle runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 1 })
	batch := workflows.ReservationBatch{WindowID: "test", Events: []workflows.WorkflowJobEvent{{
		DeliveryID: "held-1", JobID: 1 << 40, Action: workflows.JobQueued, Repository: p.org + "/app",
		Labels: []string{"self-hosted", "linux"},
	}}}
	if err := p.c.SignalWorkflow(p.ctx, workflows.PoolWorkflowID(p.name), "", workflows.SignalReservations, batch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, workflows.PoolRunnerCheckInterval+wait, "two checks at rest", func() bool {
		return p.longestCheckGap() >= workflows.PoolRunnerCheckInterval
	})
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-held")
	}
}

// longestCheckGap is the longest time between two consecutive checks for ended runner
// workflows that the pool's current run scheduled.
func (p *poolTest) longestCheckGap() time.Duration {
	p.t.Helper()
	it := p.c.GetWorkflowHistory(p.ctx, workflows.PoolWorkflowID(p.name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var last time.Time
	var gap time.Duration
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			p.t.Fatal(err)
		}
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != workflows.ActivityListEndedRunners {
			continue
		}
		at := ev.GetEventTime().AsTime()
		if !last.IsZero() {
			gap = max(gap, at.Sub(last))
		}
		last = at
	}
	return gap
}
