package pools

import (
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/workflows"
)

// Two pools of one organization share its runner listing: the scope's listing workflow makes
// one ListRunners call per interval for both (never two within the short interval), the pools
// make none of their own, and each pool still sees its own runners come online and go busy
// (no webhooks reach this world: a runner learns its job from the listing) and its own orphan,
// and not the other pool's.
func TestPoolsOfOneOrganizationShareTheListing(t *testing.T) {
	a := newPoolTest(t, "share-a")
	// The second pool: same organization, namespace, worker and client as the first.
	b := &poolTest{t: t, ctx: a.ctx, name: "share-b", org: a.org, ns: a.ns, c: a.c}
	t.Cleanup(b.terminate)
	scope := workflows.Scope{Organization: a.org}
	t.Cleanup(func() { _ = a.c.TerminateWorkflow(a.ctx, workflows.ScopeListingWorkflowID(scope), "", "test over") })
	start := time.Now()

	// Jobs outlast a rest interval of the listing, which is how their runners are seen busy.
	specA, specB := a.spec(2, 3, "170s"), b.spec(1, 2, "170s")
	persistent := false
	specA.Ephemeral, specB.Ephemeral = &persistent, &persistent
	a.apply(specA)
	b.apply(specB)
	orphan := workflows.RunnerName(b.name, "dead", 1)
	b.register(orphan, nil)

	a.eventually(wait, "2 idle runners of a, no orphan", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, "") == 2 && len(st.Orphans) == 0 && st.Listing != nil
	})
	b.eventually(wait, "1 idle runner of b and b's orphan", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, "") == 1 && len(st.Orphans) == 1 && st.Orphans[0].Name == orphan
	})

	a.queueJobs(3)
	busy := func(st workflows.PoolStatus) int { return count(st, workflows.RunnerBusy, "") }
	deadline := time.Now().Add(workflows.PoolListingInterval + wait/4)
	for busy(a.status())+busy(b.status()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("3 jobs queued: %d runners of a and %d of b busy", busy(a.status()), busy(b.status()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := a.status(); len(st.Orphans) != 0 {
		t.Errorf("pool a reports %v as orphans: b's orphan is not a's", st.Orphans)
	}

	for _, p := range []*poolTest{a, b} {
		if n := len(listings(t, p, workflows.PoolWorkflowID(p.name))); n != 0 {
			t.Errorf("pool %s listed its scope %d times itself", p.name, n)
		}
	}
	shared := listings(t, a, workflows.ScopeListingWorkflowID(scope))
	if len(shared) < 2 {
		t.Fatalf("the scope's listing workflow listed %d times", len(shared))
	}
	for i, l := range shared {
		if i > 0 && l.at.Sub(shared[i-1].at) < workflows.ScopeListingIntervalStarting-time.Second {
			t.Errorf("listings %d and %d %v apart: want one per interval (%v) for the scope",
				i-1, i, l.at.Sub(shared[i-1].at), workflows.ScopeListingIntervalStarting)
		}
	}
	last := shared[len(shared)-1].in
	if !slices.Contains(last.NamePrefixes, a.name+"-") || !slices.Contains(last.NamePrefixes, b.name+"-") {
		t.Errorf("the last listing filtered %v: one listing serves both pools", last.NamePrefixes)
	}
	elapsed := time.Since(start)
	t.Logf("%d shared listings in %v (one per %v at most while runners register)", len(shared), elapsed.Round(time.Second), workflows.ScopeListingIntervalStarting)
}

// listing is one ListRunners activity a workflow scheduled: when, and with what input.
type listing struct {
	at time.Time
	in workflows.ListRunnersInput
}

// listings reads the ListRunners activities of a workflow's runs from its history.
func listings(t *testing.T, p *poolTest, workflowID string) []listing {
	t.Helper()
	var out []listing
	resp, err := p.c.ListWorkflow(p.ctx, listRequest("WorkflowId = '"+workflowID+"'"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetExecutions() {
		it := p.c.GetWorkflowHistory(p.ctx, workflowID, e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if l, ok := listRunnersScheduled(ev); ok {
				out = append(out, l)
			}
		}
	}
	slices.SortFunc(out, func(x, y listing) int { return x.at.Compare(y.at) })
	return out
}

func listRunnersScheduled(ev *historypb.HistoryEvent) (listing, bool) {
	attrs := ev.GetActivityTaskScheduledEventAttributes()
	if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || attrs.GetActivityType().GetName() != workflows.ActivityListRunners {
		return listing{}, false
	}
	var in workflows.ListRunnersInput
	_ = converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in)
	return listing{at: ev.GetEventTime().AsTime(), in: in}, true
}
