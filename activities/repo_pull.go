package activities

import (
	"context"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// DemandRepoPull hands a pool's pull demand to the repository's pull workflow with one
// signal-with-start: the workflow is started if no run of it is going (the first pool to read
// the repository, or after it ended for want of demand). Repeating it is harmless: a demand
// replaces the pool's previous one.
func (a *TemporalActivities) DemandRepoPull(ctx context.Context, in workflows.DemandRepoPullInput) (workflows.DemandRepoPullResult, error) {
	if in.Demand.Pool == "" || strings.Count(in.Repository, "/") != 1 {
		return workflows.DemandRepoPullResult{}, temporal.NewNonRetryableApplicationError(
			"a pull demand needs a pool and a repository (owner/repo)", workflows.ErrInvalidSpec, nil)
	}
	_, err := a.Client.SignalWithStartWorkflow(ctx, workflows.RepoPullWorkflowID(in.Repository),
		workflows.SignalPullDemand, in.Demand,
		sharedWorkflowStart,
		workflows.RepoPullWorkflowType, workflows.RepoPullInput{Repository: in.Repository})
	return workflows.DemandRepoPullResult{}, err
}
