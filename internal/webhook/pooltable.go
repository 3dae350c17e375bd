package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/workflows"
)

// PoolLister is the Temporal call the pool table is built from.
type PoolLister interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// runningPoolsQuery lists the pools there are: Temporal is runnerflow's only state store, so the
// running pool workflows and their search attributes are the routing table.
var runningPoolsQuery = fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.PoolWorkflowType)

// PoolTable is the starter's cached routing table. It is refreshed every interval by Run, and
// on a job no pool fits at most once per interval, so a newly applied pool is routable at once
// while a flood of jobs for nobody's labels costs at most one listing per interval.
type PoolTable struct {
	lister   PoolLister
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	refreshMu sync.Mutex // one listing at a time; concurrent misses wait for it
	mu        sync.Mutex
	pools     []Pool
	loaded    bool
	lastMiss  time.Time
}

// NewPoolTable returns an empty table that lists pools through lister. A zero interval means
// workflows.PoolTableRefreshInterval.
func NewPoolTable(lister PoolLister, interval time.Duration, log *slog.Logger) *PoolTable {
	if interval <= 0 {
		interval = workflows.PoolTableRefreshInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PoolTable{lister: lister, interval: interval, log: log, now: time.Now}
}

// Run refreshes the table every interval until ctx ends. Listing errors are logged; the last
// good table stays in use.
func (t *PoolTable) Run(ctx context.Context) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		if err := t.Refresh(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("listing pools failed; keeping the last table", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Pools returns a copy of the current table, sorted by name.
func (t *PoolTable) Pools() []Pool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Pool(nil), t.pools...)
}

// Route picks the pool for a job from the table. On a miss it re-lists the pools, at most once
// per interval across all callers, and tries again. It returns an error only when the table has
// never been loaded and cannot be: then the starter cannot know whether the job is ours.
func (t *PoolTable) Route(ctx context.Context, job JobTarget) (Pool, bool, error) {
	if p, ok := Route(t.Pools(), job); ok {
		return p, true, nil
	}
	err := t.refreshOnMiss(ctx)
	t.mu.Lock()
	loaded := t.loaded
	t.mu.Unlock()
	if err != nil && !loaded {
		return Pool{}, false, err
	}
	p, ok := Route(t.Pools(), job)
	return p, ok, nil
}

// refreshOnMiss lists the pools unless a miss already did so within the interval.
func (t *PoolTable) refreshOnMiss(ctx context.Context) error {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	t.mu.Lock()
	now := t.now()
	due := !t.loaded || now.Sub(t.lastMiss) >= t.interval
	if due {
		t.lastMiss = now
	}
	t.mu.Unlock()
	if !due {
		return nil
	}
	return t.refreshLocked(ctx)
}

// Refresh lists the running pool workflows and replaces the table.
func (t *PoolTable) Refresh(ctx context.Context) error {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	return t.refreshLocked(ctx)
}

func (t *PoolTable) refreshLocked(ctx context.Context) error {
	pools, err := listPools(ctx, t.lister)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.pools, t.loaded = pools, true
	t.mu.Unlock()
	return nil
}

// listPools reads every running pool workflow's search attributes, all pages.
func listPools(ctx context.Context, lister PoolLister) ([]Pool, error) {
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: runningPoolsQuery, PageSize: 1000}
	var pools []Pool
	for {
		resp, err := lister.ListWorkflow(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list pool workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if p, ok := poolFromAttributes(e.GetExecution().GetWorkflowId(), e.GetSearchAttributes()); ok {
				decodeAttr(e.GetMemo().GetFields(), workflows.MemoPoolEphemeral, &p.Ephemeral)
				pools = append(pools, p)
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			break
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
	sortPools(pools)
	return pools, nil
}

// poolFromAttributes builds a table entry from a pool workflow's search attributes. A pool
// whose scope is not published yet (its first workflow task has not run) is left out until the
// next listing.
func poolFromAttributes(workflowID string, sa *commonpb.SearchAttributes) (Pool, bool) {
	fields := sa.GetIndexedFields()
	var p Pool
	decodeAttr(fields, workflows.SearchAttrPool.GetName(), &p.Name)
	if p.Name == "" {
		p.Name, _ = strings.CutPrefix(workflowID, workflows.PoolWorkflowID(""))
	}
	var scope string
	decodeAttr(fields, workflows.SearchAttrPoolScope.GetName(), &scope)
	s, err := ParseScope(scope)
	if err != nil || p.Name == "" {
		return Pool{}, false
	}
	p.Scope = s
	decodeAttr(fields, workflows.SearchAttrPoolLabels.GetName(), &p.Labels)
	for i, l := range p.Labels {
		p.Labels[i] = strings.ToLower(l)
	}
	decodeAttr(fields, workflows.SearchAttrPoolGroup.GetName(), &p.Group)
	return p, true
}

// decodeAttr decodes one search attribute (or memo field) into v, leaving v alone if it is
// absent or unreadable.
func decodeAttr(fields map[string]*commonpb.Payload, name string, v any) {
	if pl, ok := fields[name]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(pl, v)
	}
}
