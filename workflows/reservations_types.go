package workflows

import "time"

// Workflow job actions as GitHub names them in workflow_job webhooks.
const (
	JobQueued     = "queued"
	JobWaiting    = "waiting"
	JobInProgress = "in_progress"
	JobCompleted  = "completed"
)

// WorkflowJobEvent is the part of one workflow_job webhook that scaling needs; the starter
// signals it to the pool's scale window (SignalWorkflowJob). It carries no secret.
type WorkflowJobEvent struct {
	// DeliveryID is GitHub's X-GitHub-Delivery; a redelivered event has the same one.
	DeliveryID string `json:"deliveryId"`
	JobID      int64  `json:"jobId"`
	RunID      int64  `json:"runId,omitempty"`
	Action     string `json:"action"`
	// Repository is "owner/repo", for logs and routing checks.
	Repository string   `json:"repository,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	RunnerName string   `json:"runnerName,omitempty"`
	Conclusion string   `json:"conclusion,omitempty"`
	// At is the event's own time: when the intake took GitHub's delivery of it, which GitHub
	// makes as the job changes (a queued event when the job queues). A queued job's reservation
	// counts its duration from here, not from when its pool applied it, so a batch held back
	// (a pool that could not run for a while) does not extend it (beyond LateReservationHold
	// after the pool took it, which gives its job a runner). Not GitHub's created_at: a
	// job that waited for an approval is queued long after it was created. Zero (events from
	// intakes before the field) counts from when the pool applies it.
	At time.Time `json:"at,omitzero"`
	// HeadSHA, WorkflowName and JobName are the run's commit, its workflow's name and the
	// job's name as GitHub shows it ("build", "deploy (eu, web)"): what a pool that prewarms
	// needs to read the run's file and tell its jobs apart (pool_prewarm.go). Empty in events
	// from intakes before the fields.
	HeadSHA      string `json:"headSha,omitempty"`
	WorkflowName string `json:"workflowName,omitempty"`
	JobName      string `json:"jobName,omitempty"`
	// StartedAt and CompletedAt are GitHub's started_at and completed_at of the job, set only
	// on the events where they mean that: started_at on in_progress and completed events (a
	// queued event's equals its created_at), completed_at on completed events. A pool that
	// prewarms learns its jobs' run times from them.
	StartedAt   time.Time `json:"startedAt,omitzero"`
	CompletedAt time.Time `json:"completedAt,omitzero"`
}

// Reservation holds capacity for one queued job until its completion arrives or it expires.
type Reservation struct {
	JobID     int64     `json:"jobId"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Duration is the reservation's original length, kept when its expiry clock is restarted.
	Duration time.Duration `json:"duration"`
	// Repository is the job's "owner/repo", from its queued event: where the pool can read the
	// job at GitHub when its events may have been lost (pool_jobcheck.go). Empty in
	// reservations made before the field.
	Repository string `json:"repository,omitempty"`
	// Renewals counts the times the reservation's clock restarted because no runner of the
	// pool was online for its job (ReservationParams.RenewUnserved). After
	// ReservationRenewalsBeforeCheck of them the pool reads the job at GitHub without waiting
	// for an idle runner (pool_jobcheck.go).
	Renewals int `json:"renewals,omitempty"`
	// QueuedAt is the queued event's own time (WorkflowJobEvent.At: when the intake took the
	// delivery) and ReservedAt when the pool applied it, for `starter why`. State only: they
	// change no command. Zero in reservations made before the fields.
	QueuedAt   time.Time `json:"queuedAt,omitzero"`
	ReservedAt time.Time `json:"reservedAt,omitzero"`
	// Held is how long the waiting job was held by each cause (WaitCauses), HeldBy the cause
	// at HeldSince, the pool's last look; Started is set once its start was measured
	// (MetricJobWait). State only, for the metric: they change no command.
	Held      []CauseHeld `json:"held,omitempty"`
	HeldBy    string      `json:"heldBy,omitempty"`
	HeldSince time.Time   `json:"heldSince,omitzero"`
	Started   bool        `json:"started,omitempty"`
}

// CauseHeld is how long one cause held a waiting job.
type CauseHeld struct {
	Cause string        `json:"cause"`
	For   time.Duration `json:"for"`
}

// ReleasedJob remembers a job whose completion was seen, so a queued event that arrives after it
// (GitHub does not promise order) reserves nothing.
type ReleasedJob struct {
	JobID    int64     `json:"jobId"`
	ForgetAt time.Time `json:"forgetAt"`
}

// ReservationState is the pool's reservation book, carried across continue-as-new. Slices, kept
// sorted by job id, rather than maps: workflow code must not depend on map order.
type ReservationState struct {
	Reservations []Reservation `json:"reservations,omitempty"`
	Released     []ReleasedJob `json:"released,omitempty"`
}

// ReservationBatch is one scale window's deduplicated events, applied to the pool by one update
// (UpdateReservations).
type ReservationBatch struct {
	// WindowID identifies the scale window run, for the pool's record of decisions.
	WindowID string             `json:"windowId,omitempty"`
	Events   []WorkflowJobEvent `json:"events"`
}

// ReservationBatchResult is the pool's answer to a batch.
type ReservationBatchResult struct {
	Added    int `json:"added"`
	Released int `json:"released"`
	Expired  int `json:"expired"`
	// Renewed counts expired reservations kept because no runner was online for them
	// (ReservationParams.WaitForRunners).
	Renewed int `json:"renewed,omitempty"`
	Active  int `json:"active"`
}
