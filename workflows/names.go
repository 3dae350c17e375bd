// Package workflows holds runnerflow's deterministic code: the runner, pool and scale-window
// workflows, their names and ids, their input and output types, the pure decision functions and
// the one policy file. Nothing here talks to Kubernetes, GitHub or Prometheus (a test enforces it).
package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Task queues. GitHub activities have their own queue so the GitHub API budget can be declared
// as a task-queue rate limit that holds across all worker replicas; the workflows that decide
// for many runners have theirs so that none of their tasks waits behind a runner's.
const (
	// TaskQueue serves the runner workflows and the Kubernetes activities (and the deciders'
	// runs begun before DecisionTaskQueue, until they continue as new).
	TaskQueue = "runnerflow"
	// DecisionTaskQueue serves the workflows that decide for many runners: pools, scale
	// windows, scale-set listeners, the reconcile, scope listings, repository pulls and the
	// unmatched jobs. In a burst, hundreds of runner workflows' tasks wait on TaskQueue; a
	// pool's decision, and the status query an operator sends it, do not wait behind them.
	DecisionTaskQueue = "runnerflow-decisions"
	// GitHubTaskQueue serves the activities that call the GitHub API.
	GitHubTaskQueue = "runnerflow-github"
	// ScaleSetTaskQueue serves the Actions service's activities (scale sets, their runners,
	// opening a session), apart from the REST budget's queue: they spend no REST budget.
	ScaleSetTaskQueue = "runnerflow-scaleset"
)

// ScaleSetListenerTaskQueue is the task queue of one worker's scale-set listeners: a message
// session lives in the worker that opened it (the official client keeps its token in memory),
// so its polls, acknowledgements and close go to that worker's own queue.
func ScaleSetListenerTaskQueue(workerID string) string {
	return ScaleSetTaskQueue + "-listener-" + workerID
}

// The scale-set listener: one workflow per scale-set pool (ScaleSetListenerWorkflow).
const (
	ScaleSetListenerWorkflowType = "scaleset-listener"
	// SignalScaleSetMessage hands a scale set's message to its pool (ScaleSetMessageSignal).
	SignalScaleSetMessage = "scaleset-message"
	// SignalScaleSetListenerEnded tells the pool its listener ended (ScaleSetListenerEnded).
	SignalScaleSetListenerEnded = "scaleset-listener-ended"
	// SignalScaleSetSessionOpened hands the pool a new session's statistics (ScaleSetSessionOpened).
	SignalScaleSetSessionOpened = "scaleset-session-opened"
	// SignalScaleSetCapacity tells a listener the pool's new maximum (ScaleSetCapacity).
	SignalScaleSetCapacity = "scaleset-capacity"
)

// ScaleSetListenerWorkflowID is the id of a scale-set pool's listener of one set: a set
// created again (GitHub deleted it, or the spec names another) gets a listener of its own,
// so the old one's end never collides with the new one's start.
func ScaleSetListenerWorkflowID(pool string, scaleSetID int64) string {
	return "scaleset-listener/" + pool + "/" + strconv.FormatInt(scaleSetID, 10)
}

// Activities of runner scale sets (activities/scaleset_*.go).
const (
	ActivityEnsureScaleSet        = "EnsureScaleSet"
	ActivityDeleteScaleSet        = "DeleteScaleSet"
	ActivityCreateScaleSetRunner  = "CreateScaleSetRunner"
	ActivityRemoveScaleSetRunner  = "RemoveScaleSetRunner"
	ActivityOpenScaleSetSession   = "OpenScaleSetSession"
	ActivityPollScaleSet          = "PollScaleSet"
	ActivityDeleteScaleSetMessage = "DeleteScaleSetMessage"
	ActivityCloseScaleSetSession  = "CloseScaleSetSession"
	ActivityAcquireScaleSetJobs   = "AcquireScaleSetJobs"
)

// Workflow types, registered by these explicit names so renaming a Go function never breaks
// running histories.
const (
	RunnerWorkflowType      = "runner"
	PoolWorkflowType        = "pool"
	ScaleWindowWorkflowType = "scale-window"
	// ReconcileWorkflowType removes what runner workflows left behind (ReconcileWorkflow); the
	// Temporal Schedule ReconcileScheduleID starts one every interval.
	ReconcileWorkflowType = "reconcile"
	// ScopeListingWorkflowType lists a scope's runners for its pools (ScopeListingWorkflow).
	ScopeListingWorkflowType = "scope-listing"
	// RepoPullWorkflowType reads a repository's jobs for the pools that pull it
	// (RepoPullWorkflow).
	RepoPullWorkflowType = "repo-pull"
)

// ReconcileScheduleID is the one Temporal Schedule of a deployment (a Temporal namespace) that
// starts ReconcileWorkflow; the workflows it starts are named ReconcileWorkflowID plus the
// scheduled time, which the Schedule appends.
const (
	ReconcileScheduleID = "runnerflow-reconcile"
	ReconcileWorkflowID = "reconcile"
)

// Signals, updates and queries of the runner workflow.
const (
	// SignalPodStatus carries a pod transition from the pod watcher (PodStatusSignal).
	SignalPodStatus = "pod-status"
	// SignalPodStart carries the scheduling and the start of a pod created before its Secret
	// (PodStatusSignal with Scheduled; changeSecretAfterScheduling): its Secret follows them.
	// Apart from SignalPodStatus, which stays one signal per pod end.
	SignalPodStart = "pod-start"
	// SignalRunnerStatus carries the runner's GitHub-side status from a runner listing (RunnerStatusSignal).
	SignalRunnerStatus = "runner-status"
	// SignalJobStarted and SignalJobCompleted are forwarded by the starter from workflow_job
	// in_progress/completed webhooks that name this runner (JobSignal).
	SignalJobStarted   = "job-started"
	SignalJobCompleted = "job-completed"
	// SignalDrain asks a runner (or a pool) to drain (DrainRequest).
	SignalDrain = "drain"
	// UpdateDrain is the same request as an update, so the caller learns that it was accepted.
	UpdateDrain = "drain"
	// UpdateForceRemove removes a runner now, even mid-job (ForceRemoveRequest): its pod goes
	// first, so GitHub fails the job, then its registration and Secret. SignalForceRemove is the
	// same request as its pool forwards it (a workflow cannot send another an update).
	UpdateForceRemove = "force-remove"
	SignalForceRemove = "force-remove"
	// SignalCheckRegistration is the pool asking a runner it watches (RunnerInput.PoolWatches)
	// that has not reported idle or busy within its registration timeout to check its
	// registration (CheckRegistrationRequest).
	SignalCheckRegistration = "check-registration"
	// QueryStatus answers the workflow's status (RunnerStatus or PoolStatus).
	QueryStatus = "status"
)

// Signals and updates of the pool workflow.
const (
	// SignalRunnerState is how a runner reports its state changes to its pool (RunnerStateReport).
	SignalRunnerState = "runner-state"
	// SignalRunnerStates carries several runners' reports at once (RunnerStateBatch), as the
	// worker's group commit hands them over (ActivityReportRunnerState).
	SignalRunnerStates = "runner-states"
	// UpdateApply replaces the pool's spec (ApplyRequest), from `starter apply`.
	UpdateApply = "apply"
	// UpdateScale changes min/max (ScaleRequest).
	UpdateScale = "scale"
	// UpdateForceRemoveRunner force-removes one of the pool's runners (ForceRemoveRunnerRequest):
	// the pool checks the runner is its own and forwards the request to it.
	UpdateForceRemoveRunner = "force-remove-runner"
	// SignalPause and SignalResume stop and restart scaling decisions (OperatorRequest).
	SignalPause  = "pause"
	SignalResume = "resume"
	// UpdateReservations applies one scale window's batch of workflow_job events (ReservationBatch);
	// SignalReservations is the same batch as a signal, as scale windows send it since
	// changeSignalPool.
	UpdateReservations = "reservations"
	SignalReservations = "reservations"
)

// Signals of the scale-window workflow.
const (
	// SignalWorkflowJob carries one workflow_job webhook event (WorkflowJobEvent).
	SignalWorkflowJob = "workflow-job"
	// SignalWorkflowJobs carries a batch of workflow_job webhook events (WorkflowJobsSignal): the
	// starter's group commit of the deliveries that arrived while its previous signal was in flight.
	SignalWorkflowJobs = "workflow-jobs"
)

// Search attributes, registered by the Temporal server at start (see SearchAttributeTypes), so
// the Temporal UI can list "all busy runners of pool X".
var (
	SearchAttrPool        = temporal.NewSearchAttributeKeyKeyword("RunnerPool")
	SearchAttrRunnerState = temporal.NewSearchAttributeKeyKeyword("RunnerState")
	SearchAttrPoolScope   = temporal.NewSearchAttributeKeyKeyword("RunnerPoolScope")
	SearchAttrPoolLabels  = temporal.NewSearchAttributeKeyKeywordList("RunnerPoolLabels")
	SearchAttrPoolGroup   = temporal.NewSearchAttributeKeyKeyword("RunnerPoolGroup")
	// MemoPoolEphemeral is the pool workflow's memo field saying whether its runners are
	// ephemeral (a bool), kept equal to the spec by the pool (changeEphemeralMemo). The starter
	// reads it with the pool listing it routes by: a memo needs no registration with the
	// server, unlike a search attribute, so an upgrade needs no operator step.
	MemoPoolEphemeral = "ephemeral"
)

// SearchAttributeTypes lists the custom search attributes and their types, for the server's
// registration at start (`temporal server start-dev --search-attribute`, `temporal operator
// search-attribute create`).
func SearchAttributeTypes() map[string]string {
	return map[string]string{
		SearchAttrPool.GetName():        "Keyword",
		SearchAttrRunnerState.GetName(): "Keyword",
		SearchAttrPoolScope.GetName():   "Keyword",
		SearchAttrPoolLabels.GetName():  "KeywordList",
		SearchAttrPoolGroup.GetName():   "Keyword",
	}
}

// PoolWorkflowID is the id of a pool's long-lived workflow.
func PoolWorkflowID(pool string) string { return "pool/" + pool }

// ScaleWindowWorkflowID is the id shared by all scale windows of a pool; at most one runs at once.
func ScaleWindowWorkflowID(pool string) string { return "scale-window/" + pool }

// RunnerWorkflowID is the id of one runner's workflow.
func RunnerWorkflowID(pool, runner string) string { return "runner/" + pool + "/" + runner }

// maxRunnerNameLength keeps a runner name a valid DNS label (pod and secret name) and GitHub
// runner name.
const maxRunnerNameLength = 63

// RunnerName derives the one name a runner has everywhere: pod, secret, GitHub runner and
// workflow id suffix. generation distinguishes pool incarnations (a pool deleted and created
// again must not reuse names of runners that may still exist); seq counts runners within one.
// Names longer than a DNS label are cut and given a hash suffix so they stay unique.
func RunnerName(pool, generation string, seq int64) string {
	name := pool + "-" + generation + "-" + strconv.FormatInt(seq, 36)
	if len(name) <= maxRunnerNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(name[:maxRunnerNameLength-len(suffix)], "-") + suffix
}

// Generation derives a short, DNS-safe generation tag from a pool workflow's first run id.
func Generation(firstRunID string) string {
	sum := sha256.Sum256([]byte(firstRunID))
	return hex.EncodeToString(sum[:])[:4]
}

// PoolFromRunnerName recovers the pool from a runner name made by RunnerName (the starter needs
// it to address the runner workflow named in a workflow_job event). Pool names are validated
// short enough that their runner names are never cut.
func PoolFromRunnerName(runner string) (string, bool) {
	parts := strings.Split(runner, "-")
	if len(parts) < 3 {
		return "", false
	}
	pool := strings.Join(parts[:len(parts)-2], "-")
	gen, seq := parts[len(parts)-2], parts[len(parts)-1]
	if pool == "" || len(gen) != 4 || seq == "" {
		return "", false
	}
	return pool, true
}

// MaxPoolNameLength keeps every runner name of a pool within a DNS label without cutting, so
// PoolFromRunnerName always works: pool + "-" + 4-char generation + "-" + up to 13 base-36 digits.
const MaxPoolNameLength = maxRunnerNameLength - 1 - 4 - 1 - 13
