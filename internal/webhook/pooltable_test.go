package webhook

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// TestPoolTableReadsPoolWorkflows lists real pool executions: attributes decoded, labels
// lower-cased, a pool without a published scope left out.
func TestPoolTableReadsPoolWorkflows(t *testing.T) {
	org := unique("tbl-org-")
	withGroup := Pool{Name: unique("tbl-a-"), Scope: workflows.Scope{Organization: org}, Labels: []string{"Linux", "X64"}, Group: "ml"}
	startPool(t, withGroup)
	bare := unique("tbl-bare-")
	startIdle(t, workflows.PoolWorkflowID(bare), workflows.PoolWorkflowType,
		temporal.NewSearchAttributes(workflows.SearchAttrPool.ValueSet(bare)))
	table := NewPoolTable(tc, time.Hour, nil)
	waitForPools(t, table, withGroup.Name)

	for _, p := range table.Pools() {
		if p.Name == bare {
			t.Errorf("pool %s without a scope is in the table: %+v", bare, p)
		}
		if p.Name == withGroup.Name {
			if p.Scope != withGroup.Scope || p.Group != "ml" || len(p.Labels) != 2 || p.Labels[0] != "linux" || p.Labels[1] != "x64" {
				t.Errorf("table entry %+v, want %+v with lower-cased labels", p, withGroup)
			}
		}
	}
	got, ok, err := table.Route(context.Background(), JobTarget{Repository: org + "/app", Owner: org, Labels: []string{"self-hosted", "LINUX"}})
	if err != nil || !ok || got.Name != withGroup.Name {
		t.Errorf("Route = %+v, %v, %v; want %s", got, ok, err, withGroup.Name)
	}
}

// TestPoolTableRefreshesOnMissAtMostOncePerInterval: a burst of jobs nobody serves costs one
// listing per interval, and a pool applied after the table was loaded is found on a miss once
// the interval has passed.
func TestPoolTableRefreshesOnMissAtMostOncePerInterval(t *testing.T) {
	lister := &countingLister{}
	table := NewPoolTable(lister, time.Minute, nil)
	clock := time.Now()
	table.now = func() time.Time { return clock }
	org := unique("miss-org-")
	job := JobTarget{Repository: org + "/app", Owner: org, Labels: []string{"linux"}}

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := table.Route(context.Background(), job); ok || err != nil {
				t.Errorf("routed a job no pool serves: ok %v err %v", ok, err)
			}
		}()
	}
	wg.Wait()
	if n := lister.n.Load(); n != 1 {
		t.Fatalf("50 concurrent misses listed pools %d times, want once", n)
	}

	pool := unique("miss-pool-")
	startPool(t, orgPool(pool, org, "", "linux"))
	waitForPools(t, NewPoolTable(tc, time.Hour, nil), pool) // visible to listings now
	if _, ok, _ := table.Route(context.Background(), job); ok {
		t.Fatal("a miss within the interval listed again")
	}
	clock = clock.Add(time.Minute)
	if got, ok, err := table.Route(context.Background(), job); err != nil || !ok || got.Name != pool {
		t.Fatalf("after the interval: Route = %+v, %v, %v; want %s", got, ok, err, pool)
	}
	before := lister.n.Load()
	if _, ok, _ := table.Route(context.Background(), job); !ok || lister.n.Load() != before {
		t.Errorf("a hit listed pools again (%d → %d listings)", before, lister.n.Load())
	}
}

// TestPoolTableRunKeepsItFresh: the background refresh finds a new pool without any miss.
func TestPoolTableRunKeepsItFresh(t *testing.T) {
	table := NewPoolTable(tc, 20*time.Millisecond, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go table.Run(ctx)
	pool := unique("run-pool-")
	startPool(t, orgPool(pool, unique("run-org-"), "", "linux"))
	deadline := time.Now().Add(30 * time.Second)
	for !hasPool(table.Pools(), pool) {
		if time.Now().After(deadline) {
			t.Fatalf("Run never picked up pool %s", pool)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
