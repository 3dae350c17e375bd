package workflows

import "go.temporal.io/sdk/workflow"

// The deciders' move to DecisionTaskQueue. A decider started by this build starts there (the
// starter, the intake, the activities and the reconcile's schedule name it); one begun on
// TaskQueue before it moves at its next continue-as-new, and a pool's scale-set listener
// starts there. One change per workflow type, since a change belongs to one type's histories.
const (
	changePoolDecidesApart      = "pool-decides-apart"
	changeWindowDecidesApart    = "window-decides-apart"
	changeListenerDecidesApart  = "listener-decides-apart"
	changeListingDecidesApart   = "listing-decides-apart"
	changePullDecidesApart      = "pull-decides-apart"
	changeUnmatchedDecidesApart = "unmatched-decides-apart"
)

func askPoolDecidesApart(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changePoolDecidesApart, workflow.DefaultVersion, 1)
}

func askWindowDecidesApart(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeWindowDecidesApart, workflow.DefaultVersion, 1)
}

func askListenerDecidesApart(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeListenerDecidesApart, workflow.DefaultVersion, 1)
}

func askListingDecidesApart(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeListingDecidesApart, workflow.DefaultVersion, 1)
}

func askPullDecidesApart(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changePullDecidesApart, workflow.DefaultVersion, 1)
}

func askUnmatchedDecidesApart(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeUnmatchedDecidesApart, workflow.DefaultVersion, 1)
}

// onDecisionQueue is ctx with the run it continues as, or the child it starts, sent to
// DecisionTaskQueue once the run's change (ask) is in force; a run recorded before the change
// keeps the queue it had.
func onDecisionQueue(ctx workflow.Context, ask func(workflow.Context) workflow.Version) workflow.Context {
	if ask(ctx) < 1 {
		return ctx
	}
	return workflow.WithWorkflowTaskQueue(ctx, DecisionTaskQueue)
}
