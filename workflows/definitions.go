package workflows

// Definition is one workflow a worker registers: its type name and function.
type Definition struct {
	Name string
	Fn   any
	// LivesWithItsRunner marks the runner workflow, which Worker Versioning pins to the build
	// that started it; the others move to the current build at their next task.
	LivesWithItsRunner bool
}

// Definitions are every workflow the worker registers, by its explicit type name. The replay
// test has a recorded history for each.
var Definitions = []Definition{
	{Name: RunnerWorkflowType, Fn: RunnerWorkflow, LivesWithItsRunner: true},
	{Name: PoolWorkflowType, Fn: PoolWorkflow},
	{Name: ScaleWindowWorkflowType, Fn: ScaleWindowWorkflow},
	{Name: ReconcileWorkflowType, Fn: ReconcileWorkflow},
	{Name: ScopeListingWorkflowType, Fn: ScopeListingWorkflow},
	{Name: RepoPullWorkflowType, Fn: RepoPullWorkflow},
	{Name: UnmatchedJobsWorkflowType, Fn: UnmatchedJobsWorkflow},
	{Name: ScaleSetListenerWorkflowType, Fn: ScaleSetListenerWorkflow},
}
