package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/workflows"
)

// This file holds reconcile's reads of Temporal: which pools the namespace knows and what each
// running one owns, and which runner workflows have ended. Both only read.

// ListPoolOwnership lists the namespace's pools, running and closed (within the namespace's
// retention), with one visibility listing, and asks each running pool for its status: the runner
// names it owns are its runners and its warm registrations. A pool whose status cannot be read
// is reported Unavailable rather than failing the listing, so one stuck pool does not stop the
// others' reconcile; reconcile leaves such a pool's objects alone.
func (a *TemporalActivities) ListPoolOwnership(ctx context.Context, _ workflows.ListPoolOwnershipInput) (workflows.ListPoolOwnershipResult, error) {
	pools, err := a.listPools(ctx)
	if err != nil {
		return workflows.ListPoolOwnershipResult{}, err
	}
	for i := range pools {
		if err := a.readOwnership(ctx, &pools[i]); err != nil {
			return workflows.ListPoolOwnershipResult{}, err
		}
	}
	return workflows.ListPoolOwnershipResult{Pools: pools}, nil
}

// listPools reads every pool workflow execution (a pool that continued as new has several) and
// keeps one entry per pool, with the scope its search attribute names. Whether it runs is read
// by readOwnership: the visibility listing may lag a moment behind a continue-as-new.
func (a *TemporalActivities) listPools(ctx context.Context) ([]workflows.PoolOwnership, error) {
	var pools []workflows.PoolOwnership
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s'", workflows.PoolWorkflowType),
	}
	for {
		resp, err := a.Client.ListWorkflow(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list pool workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			name, ok := strings.CutPrefix(e.GetExecution().GetWorkflowId(), workflows.PoolWorkflowID(""))
			if !ok {
				continue
			}
			i := slices.IndexFunc(pools, func(p workflows.PoolOwnership) bool { return p.Name == name })
			if i < 0 {
				pools = append(pools, workflows.PoolOwnership{Name: name})
				i = len(pools) - 1
			}
			if pools[i].Scope == (workflows.Scope{}) {
				pools[i].Scope = poolScope(e.GetSearchAttributes())
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			break
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
	slices.SortFunc(pools, func(a, b workflows.PoolOwnership) int { return strings.Compare(a.Name, b.Name) })
	return pools, nil
}

// poolScope reads a pool execution's RunnerPoolScope search attribute.
func poolScope(sa *commonpb.SearchAttributes) workflows.Scope {
	payload := sa.GetIndexedFields()[workflows.SearchAttrPoolScope.GetName()]
	var s string
	if payload == nil || converter.GetDefaultDataConverter().FromPayload(payload, &s) != nil {
		return workflows.Scope{}
	}
	scope, _ := workflows.ParseScope(s)
	return scope
}

// readOwnership describes the pool's workflow (strongly consistent) and, while it runs, queries
// its status for the names it owns and its scope. A running pool whose status query fails is
// Unavailable (none of its objects is touched); a failed describe fails the activity, to be
// retried.
func (a *TemporalActivities) readOwnership(ctx context.Context, p *workflows.PoolOwnership) error {
	desc, err := a.Client.DescribeWorkflowExecution(ctx, workflows.PoolWorkflowID(p.Name), "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return nil // gone beyond retention since the listing: closed
	case err != nil:
		return fmt.Errorf("describe pool %s: %w", p.Name, err)
	case desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil
	}
	p.Running = true
	var st workflows.PoolStatus
	v, err := a.Client.QueryWorkflow(ctx, workflows.PoolWorkflowID(p.Name), "", workflows.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		p.Unavailable = err.Error()
		return nil
	}
	p.Scope = st.Spec.Scope()
	p.Clusters = slices.Clone(st.Spec.Clusters)
	for _, r := range st.Runners {
		p.Owned = append(p.Owned, r.Name)
		if r.Cluster != "" {
			p.Clusters = append(p.Clusters, r.Cluster)
		}
	}
	slices.Sort(p.Clusters)
	p.Clusters = slices.Compact(p.Clusters)
	for _, w := range st.Warm {
		p.Owned = append(p.Owned, w.Name)
	}
	slices.Sort(p.Owned)
	p.Owned = slices.Compact(p.Owned)
	return nil
}

// FindEndedWorkflows describes each workflow (strongly consistent, unlike a visibility
// listing) and returns the ids with no running execution: closed, or never started. Any other
// answer fails the activity, to be retried: a workflow not known to have ended is not taken for
// ended.
func (a *TemporalActivities) FindEndedWorkflows(ctx context.Context, in workflows.FindEndedWorkflowsInput) (workflows.FindEndedWorkflowsResult, error) {
	var out workflows.FindEndedWorkflowsResult
	for _, id := range in.WorkflowIDs {
		desc, err := a.Client.DescribeWorkflowExecution(ctx, id, "")
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			out.Ended = append(out.Ended, id)
		case err != nil:
			return workflows.FindEndedWorkflowsResult{}, fmt.Errorf("describe workflow %s: %w", id, err)
		case desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			out.Ended = append(out.Ended, id)
		}
	}
	return out, nil
}
