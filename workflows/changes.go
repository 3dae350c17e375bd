package workflows

// Change is one change to the commands a workflow issues, gated by workflow.GetVersion so that
// histories written before it replay on the code after it.
type Change struct {
	// ID is the change id the GetVersion call names (its constant sits beside the call).
	ID string
	// Workflow is the workflow type whose commands it changes.
	Workflow string
	// Release is the release that brought it (CHANGELOG.md).
	Release string
	// What it changes, in one line.
	What string
}

// Changes lists every change id in the order it landed; each GetVersion call's id is here and
// each id here is asked by a GetVersion call (changes_test.go). Adding a gate adds one line at
// the end. Version 1 is the new branch of every change so far.
//
// Retiring an old branch (the code a GetVersion call runs for workflow.DefaultVersion): only
// once no open history can take it, that is, every run that could have asked the change before
// its release has closed. A pool's or scope listing's run ends at its next continue-as-new (the
// new run asks afresh), but a pool that never continues as new keeps its run; a runner's run
// lasts its runner's life (a persistent runner: weeks); a scale window's and a reconcile's
// minutes. Check with `temporal workflow list` for runs of the workflow type started before
// the release that still run. Then keep the call as GetVersion(ctx, id, 1, 1) (histories
// with the marker still replay; one without it fails loudly instead of taking a branch that is
// gone), delete the old branch and its recorded histories that take it, and leave the line
// here. Only once no open history holds the marker either may the call go, with its line.
var Changes = []Change{
	{changeReportJob, RunnerWorkflowType, "v2", "a runner that learns its job after reporting busy reports again with the job"},
	{changeEndJobWithRunner, PoolWorkflowType, "v2", "a job's reservation ends when its runner leaves it or another pool's runner takes it"},
	{changeOpenAtOnce, ScaleWindowWorkflowType, "v2", "the opening batch of an idle pool's window is applied at once"},
	{changeEphemeralDoneDrains, RunnerWorkflowType, "v2", "an ephemeral runner whose job completed reports draining, not idle"},
	{changeWarmRegistrations, PoolWorkflowType, "v2", "warm registrations are minted, refreshed and removed ahead of runners"},
	{changeReadNotGuess, RunnerWorkflowType, "v2", "the registration check acts on what the cluster and GitHub say (decideRegistration)"},
	{changeNewSpecRules, PoolWorkflowType, "v2", "a new pool's start checks its spec with ValidateNew"},
	{changeLeanLifecycle, RunnerWorkflowType, "v3", "a runner spends only the actions its decisions need (one deadline timer, fewer reports and upserts)"},
	{changeLeanRunners, PoolWorkflowType, "v3", "runners start with their search attributes set; listings signal only news; one wake-up timer kept"},
	{changeRunSpansWindows, ScaleWindowWorkflowType, "v3", "events that arrive during a window's update open the next window in the same run"},
	{changeStartInBatches, PoolWorkflowType, "v4", "runners start through one StartRunnerWorkflows activity a batch, not a child workflow each"},
	{changeWatchRegistration, PoolWorkflowType, "v4", "the pool watches its runners' registration deadlines and asks overdue ones to check"},
	{changeEphemeralMemo, PoolWorkflowType, "v4", "the pool publishes MemoPoolEphemeral for the intake's routing of completed events"},
	{changeSignalPool, ScaleWindowWorkflowType, "v4", "a window hands its batch to the pool by signal, not by an update through an activity"},
	{changeFailuresByStart, PoolWorkflowType, "v4", "a runner started before the backoff in force keeps that backoff instead of doubling it"},
	{changeNeverOnlineEnds, RunnerWorkflowType, "v4", "a runner that never came online ends and leaves its replacement to the pool"},
	{changeReservationsFromEventTimes, PoolWorkflowType, "v4", "a queued job's reservation counts from its event's own time"},
	{changeSharedListing, PoolWorkflowType, "v4", "the scope's listing workflow lists the runners; the pool states its demand"},
	{changeOpenOnDemand, ScaleWindowWorkflowType, "v4", "the opening batch goes at once only when it holds a queued job"},
	{changeReservationsWaitForRunners, PoolWorkflowType, "v5", "a reservation that expires with no runner online for it restarts its clock"},
	{changeClusterPlacement, PoolWorkflowType, "v5", "a pool that names clusters probes them and places each batch on the first that answers"},
	{changeRedeliver, ReconcileWorkflowType, "v5", "a run with a hook redelivers its failed workflow_job deliveries before looking for orphans"},
	{changePullScaling, PoolWorkflowType, "v5", "a pool with a pull section reads its demand from GitHub on its timer"},
	{changeCheckReservedJobs, PoolWorkflowType, "v5", "reserved jobs no runner serves are read at GitHub and applied as the lost events"},
	{changeRunnerCheckAtRest, PoolWorkflowType, "v5", "at rest the check for runners that ended unreported runs every PoolRunnerCheckInterval, not every listing interval"},
	{changeJobCheckWake, PoolWorkflowType, "v5", "the pool wakes when a check of reserved jobs is due"},
	{changeRenewUnserved, PoolWorkflowType, "v5", "wait-for-runners renews by what serves what: a busy runner's job is served, only idle runners count against the rest"},
	{changeCheckStaleReservations, PoolWorkflowType, "v5", "a reservation renewed ReservationRenewalsBeforeCheck times with no runner online makes a check of reserved jobs due"},
	{changeLiftReadEnds, PoolWorkflowType, "v5", "a check lifts only the unattributed ends it accounts for; an end past its hold no longer makes a check due"},
	{changeWarmApart, PoolWorkflowType, "v5", "warm registrations are minted into the warm namespace, their spent Secrets removed in batches, old in-place ones retired"},
	{changeScaleSetPools, PoolWorkflowType, "v5", "a scale-set pool brings its set up, starts its listener and scales on the set's messages"},
	{changeWarmApartCopy, RunnerWorkflowType, "v5", "a runner whose warm registration waits in another namespace starts from a copy (StartWarmRunner)"},
	{changeReconcileNamedClusters, ReconcileWorkflowType, "v5", "a run also lists pods and Secrets in the named clusters running pools name"},
	{changeConfirmGone, RunnerWorkflowType, "v5", "a listing's silence is confirmed by GET runner by id; only a 404 ends the runner"},
	{changeClusterLost, RunnerWorkflowType, "v5", "a runner on a named cluster unread for ClusterLostAfter and offline at GitHub hands its job back to the pool"},
	{changeHarmlessProbe, ReconcileWorkflowType, "v5", "a failing hook is probed with a ping or a succeeded delivery, never a failed event"},
	{changeSharedPull, PoolWorkflowType, "v5", "a pull pool reads through its repositories' shared repo-pull workflows and falls back to reservations on a stale answer"},
	{changeWarmNamespace, ReconcileWorkflowType, "v5", "a run whose warm namespace differs from its namespace also lists the Secrets there"},
	{changeCompletedRunnerLeaves, PoolWorkflowType, "v6", "an ephemeral runner named by its job's completed event counts as leaving, not as staying or busy"},
	{changeEndsCountedOnce, PoolWorkflowType, "v6", "a job whose runner ended before the pool learned it is counted over once, not again by its own event"},
	{changeScaleSetRanUnseen, PoolWorkflowType, "v6", "a scale-set pool counts a runner that finished a job no message had named it at yet as that job done, for a bounded hold it wakes at"},
	{changeScaleSetAcquireOffers, ScaleSetListenerWorkflowType, "v7", "a listener acquires the jobs its set is offered (GHES), as many as the set has room for"},
	{changeScaleSetCapacityDrained, ScaleSetListenerWorkflowType, "v7", "a listener reads the pool's capacity signals once more before it continues as new"},
	{changeScaleSetCloseTimedOut, ScaleSetListenerWorkflowType, "v7", "a listener closes a session whose poll timed out on a worker still serving it"},
	{changeScaleSetSessionStatistics, ScaleSetListenerWorkflowType, "v7", "a listener hands the pool the statistics each session opens with and starts each session's cursor afresh"},
	{changeScaleSetStatisticsFirst, PoolWorkflowType, "v7", "a scale-set pool reopens reassigned jobs, trims its ledger to the statistics after a hold, takes every message's and a session's opening statistics, and follows a session that numbers its messages afresh"},
	{changeScaleSetLeaveAfterRunners, PoolWorkflowType, "v7", "a set the pool moved on from is deleted once the runners it had then have ended, not at once"},
	{changeScaleSetHandOverAcquired, ScaleSetListenerWorkflowType, "v7", "a listener hands the pool, with a message, the jobs it acquired after reading it"},
	{changeScaleSetAcquiredAssigned, PoolWorkflowType, "v7", "a scale-set pool counts the jobs its listener acquired as assigned when their message arrives, not when their assigned messages do"},
	{changeSecretAfterScheduling, RunnerWorkflowType, "v7", "a JIT runner's pod comes first; its Secret is written once the pod is scheduled and deleted once the runner started, and its end deletes the pod"},
	{changePoolDecidesApart, PoolWorkflowType, "v7", "a pool continues as new, and starts its scale-set listeners, on DecisionTaskQueue"},
	{changeWindowDecidesApart, ScaleWindowWorkflowType, "v7", "a scale window continues as new on DecisionTaskQueue"},
	{changeListenerDecidesApart, ScaleSetListenerWorkflowType, "v7", "a scale-set listener continues as new on DecisionTaskQueue"},
	{changeListingDecidesApart, ScopeListingWorkflowType, "v7", "a scope's listing continues as new on DecisionTaskQueue"},
	{changePullDecidesApart, RepoPullWorkflowType, "v7", "a repository's pull continues as new on DecisionTaskQueue"},
	{changeUnmatchedDecidesApart, UnmatchedJobsWorkflowType, "v7", "the unmatched jobs' workflow continues as new on DecisionTaskQueue"},
	{changeScaleSetSessionStatisticsOrder, PoolWorkflowType, "v7", "a scale-set pool keeps a session's message statistics over the older statistics that session opened with, when it takes the message first"},
	{changeLostSecretByName, RunnerWorkflowType, "v7", "a runner leaving a lost cluster deletes by name the Secret of a credential step that failed mid-step"},
	{changeReportsBatched, RunnerWorkflowType, "v7", "a runner hands its state reports to its pool through the worker's group commit, by a local activity, instead of signalling the pool"},
	{changeListingTellsInBatches, PoolWorkflowType, "v7", "a pool tells its runners what a listing found of them with one activity per batch instead of a signal each"},
	{changePrewarm, PoolWorkflowType, "v7", "a pool with prewarm on reads each run's job graph once and starts runners ahead of the jobs it predicts"},
}
