package activities

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// sharedWorkflowStart starts a workflow that pools' demands keep going (a scope's listing, a
// repository's pull) when a demand finds no run of it: a run that ended may be followed by a
// new one, and a running one takes the demand.
var sharedWorkflowStart = client.StartWorkflowOptions{
	TaskQueue:                workflows.DecisionTaskQueue,
	WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
}

// DemandScopeListing hands a pool's listing demand to its scope's listing workflow with one
// signal-with-start: the workflow is started if no run of it is going (the first pool of a
// scope, or after it ended for want of demand). Repeating it is harmless: a demand replaces
// the pool's previous one.
func (a *TemporalActivities) DemandScopeListing(ctx context.Context, in workflows.DemandScopeListingInput) (workflows.DemandScopeListingResult, error) {
	if err := in.Scope.Validate(); err != nil || in.Demand.Pool == "" {
		msg := "a listing demand needs a scope and a pool"
		if err != nil {
			msg = err.Error()
		}
		return workflows.DemandScopeListingResult{}, temporal.NewNonRetryableApplicationError(msg, workflows.ErrInvalidSpec, nil)
	}
	_, err := a.Client.SignalWithStartWorkflow(ctx, workflows.ScopeListingWorkflowID(in.Scope),
		workflows.SignalListingDemand, in.Demand,
		sharedWorkflowStart,
		workflows.ScopeListingWorkflowType, workflows.ScopeListingInput{Scope: in.Scope})
	return workflows.DemandScopeListingResult{}, err
}
