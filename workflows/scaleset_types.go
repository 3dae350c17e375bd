package workflows

import "time"

// ScaleSetSpec makes a pool a runner scale set's: GitHub's own autoscaling protocol, in which a
// listener holds a message session with the Actions service and runners get just-in-time
// configurations from the set (docs/pools.md, Runner scale sets). The set is registered in the
// pool's scope and runner group, carries the pool's labels, and its runners are bounded by the
// pool's minReplicas and maxReplicas.
type ScaleSetSpec struct {
	// Name is the set's name at GitHub, unique within its runner group; empty means the
	// pool's name.
	Name string `json:"name,omitempty"`
	// KeepOnDelete leaves the set at GitHub when the pool is deleted; by default it goes with
	// the pool.
	KeepOnDelete bool `json:"keepOnDelete,omitempty"`
}

// withDefaults names the set after the pool when the spec names it not.
func (s ScaleSetSpec) withDefaults(pool string) ScaleSetSpec {
	out := s
	if out.Name == "" {
		out.Name = pool
	}
	return out
}

// IsScaleSet reports whether the pool is a runner scale set's.
func (s PoolSpec) IsScaleSet() bool { return s.ScaleSet != nil }

// ScaleSetStatistics are the counts the Actions service sends with a scale set's messages.
type ScaleSetStatistics struct {
	AvailableJobs     int `json:"availableJobs"`
	AcquiredJobs      int `json:"acquiredJobs"`
	AssignedJobs      int `json:"assignedJobs"`
	RunningJobs       int `json:"runningJobs"`
	RegisteredRunners int `json:"registeredRunners"`
	BusyRunners       int `json:"busyRunners"`
	IdleRunners       int `json:"idleRunners"`
}

// EnsureScaleSetInput names the scale set to create, or to adopt and bring to the spec.
type EnsureScaleSetInput struct {
	Scope Scope `json:"scope"`
	// RunnerGroup is the group's name; empty means GitHub's default group.
	RunnerGroup string   `json:"runnerGroup,omitempty"`
	Name        string   `json:"name"`
	Labels      []string `json:"labels"`
}

// EnsureScaleSetOutput is the set GitHub has now.
type EnsureScaleSetOutput struct {
	ScaleSetID int64 `json:"scaleSetID"`
	// Created: there was none of that name; Updated: there was, with other labels.
	Created bool `json:"created,omitempty"`
	Updated bool `json:"updated,omitempty"`
	// NameOnlyLabels: the set kept only its name as its label though the spec names others
	// (GHES before 3.21 without DistributedTask.AllowRunnerScaleSetCustomLabels): jobs reach
	// it only by runs-on naming the set.
	NameOnlyLabels bool `json:"nameOnlyLabels,omitempty"`
}

// DeleteScaleSetInput names a scale set to delete.
type DeleteScaleSetInput struct {
	Scope      Scope `json:"scope"`
	ScaleSetID int64 `json:"scaleSetID"`
}

// DeleteScaleSetOutput: Deleted is false when GitHub had no such set already.
type DeleteScaleSetOutput struct {
	Deleted bool `json:"deleted,omitempty"`
}

// CreateScaleSetRunnerInput asks for a runner of a scale set: its JIT configuration is written
// straight into the runner's Secret, as RegisterRunner does for REST runners.
type CreateScaleSetRunnerInput struct {
	Pool       string `json:"pool"`
	Name       string `json:"name"`
	WorkflowID string `json:"workflowID"`
	Namespace  string `json:"namespace"`
	Scope      Scope  `json:"scope"`
	ScaleSetID int64  `json:"scaleSetID"`
	WorkFolder string `json:"workFolder,omitempty"`
	// PodFirst: as RegisterRunnerInput.PodFirst, the runner's pod may have read the Secret an
	// earlier attempt wrote: its runner is adopted whatever the service says of it now.
	PodFirst bool `json:"podFirst,omitempty"`
}

// CreateScaleSetRunnerOutput names the runner and its Secret, never the credential.
type CreateScaleSetRunnerOutput struct {
	RunnerID   int64  `json:"runnerID"`
	SecretName string `json:"secretName"`
	SecretUID  string `json:"secretUID"`
	// Adopted: an earlier attempt's registration was kept.
	Adopted bool `json:"adopted,omitempty"`
}

// RemoveScaleSetRunnerInput names a scale set's runner to remove.
type RemoveScaleSetRunnerInput struct {
	Scope    Scope `json:"scope"`
	RunnerID int64 `json:"runnerID"`
	// Name and ScaleSetID, with RunnerID zero: remove the set's runner of that name, if the
	// service has one (a registration whose id never reached the workflow).
	Name       string `json:"name,omitempty"`
	ScaleSetID int64  `json:"scaleSetID,omitempty"`
}

// RemoveScaleSetRunnerOutput: Removed is false when the service had no such runner already.
type RemoveScaleSetRunnerOutput struct {
	Removed bool `json:"removed,omitempty"`
}

// OpenScaleSetSessionInput opens a scale set's message session for Owner.
type OpenScaleSetSessionInput struct {
	Scope      Scope  `json:"scope"`
	ScaleSetID int64  `json:"scaleSetID"`
	Owner      string `json:"owner"`
}

// OpenScaleSetSessionOutput names the session and the task queue of the worker holding it.
type OpenScaleSetSessionOutput struct {
	SessionID  string             `json:"sessionID"`
	TaskQueue  string             `json:"taskQueue"`
	Statistics ScaleSetStatistics `json:"statistics"`
}

// ScaleSetSessionRef names an open session; its activities run on TaskQueue's worker.
type ScaleSetSessionRef struct {
	ScaleSetID int64  `json:"scaleSetID"`
	SessionID  string `json:"sessionID"`
}

// PollScaleSetInput long-polls the session's queue once.
type PollScaleSetInput struct {
	Session       ScaleSetSessionRef `json:"session"`
	LastMessageID int64              `json:"lastMessageID"`
	// MaxCapacity is the most runners the pool may run, reported to the service.
	MaxCapacity int `json:"maxCapacity"`
}

// PollScaleSetOutput holds the message that came, or none when the poll ended empty.
type PollScaleSetOutput struct {
	Message *ScaleSetMessage `json:"message,omitempty"`
}

// ScaleSetMessage is one message of a set's queue: job events and the set's statistics.
type ScaleSetMessage struct {
	ID         int64              `json:"id"`
	Statistics ScaleSetStatistics `json:"statistics"`
	Jobs       []ScaleSetJobEvent `json:"jobs,omitempty"`
}

// Scale-set job events. An available job is one the service offers the set (GHES's flow) and
// assigns only once the listener acquires it; the ledger counts it from its assigned event.
const (
	ScaleSetJobAvailable = "available"
	ScaleSetJobAssigned  = "assigned"
	ScaleSetJobStarted   = "started"
	ScaleSetJobCompleted = "completed"
)

// ScaleSetJobEvent is one job message: a job assigned to the set, started on one of its
// runners, or completed (with or without a runner).
type ScaleSetJobEvent struct {
	Event           string   `json:"event"`
	RunnerRequestID int64    `json:"runnerRequestID"`
	JobID           string   `json:"jobID"`
	Repository      string   `json:"repository"`
	Labels          []string `json:"labels,omitempty"`
	RunnerID        int64    `json:"runnerID,omitempty"`
	RunnerName      string   `json:"runnerName,omitempty"`
	Result          string   `json:"result,omitempty"`
}

// DeleteScaleSetMessageInput acknowledges a message once the pool holds it.
type DeleteScaleSetMessageInput struct {
	Session   ScaleSetSessionRef `json:"session"`
	MessageID int64              `json:"messageID"`
}

// AcquireScaleSetJobsInput acquires jobs the service offered the set, through the session.
type AcquireScaleSetJobsInput struct {
	Session          ScaleSetSessionRef `json:"session"`
	RunnerRequestIDs []int64            `json:"runnerRequestIDs"`
}

// AcquireScaleSetJobsOutput lists the jobs the set now holds; the others were taken by another
// listener, finished, or withdrawn, and are no longer the set's to acquire.
type AcquireScaleSetJobsOutput struct {
	Acquired []int64 `json:"acquired,omitempty"`
}

// CloseScaleSetSessionInput ends a session.
type CloseScaleSetSessionInput struct {
	Session ScaleSetSessionRef `json:"session"`
}

// LeftScaleSet is a set the pool moved on from, to be deleted once Runners (the pool's
// runners when it left, each the old set's) have ended.
type LeftScaleSet struct {
	ScaleSetID int64    `json:"scaleSetID"`
	Scope      Scope    `json:"scope"`
	Runners    []string `json:"runners,omitempty"`
}

// PoolScaleSetState is a scale-set pool's hold on its set: which set, whether its listener
// runs, and what the set's messages said. Carried across continue-as-new.
type PoolScaleSetState struct {
	// Key is the set's description (EnsureScaleSetInput as JSON) the set was last brought to;
	// an applied spec that describes it otherwise brings it there again.
	Key        string `json:"key,omitempty"`
	ScaleSetID int64  `json:"scaleSetID,omitempty"`
	// Listening: a listener of ScaleSetID was started and has not said it ended; ListenerMax
	// is the maximum it was last told, which it reports to the service.
	Listening   bool `json:"listening,omitempty"`
	ListenerMax int  `json:"listenerMax,omitempty"`
	// SessionID is the session of the last message handed over.
	SessionID string `json:"sessionID,omitempty"`
	// Ledger holds the set's jobs, each once; Statistics and MessageAt are the last message's.
	Ledger     ScaleSetLedger     `json:"ledger"`
	Statistics ScaleSetStatistics `json:"statistics"`
	MessageAt  time.Time          `json:"messageAt,omitzero"`
	// AcquiredSince counts the jobs the listener acquired after Statistics were taken: the
	// service assigned them since, so they count on top of its assigned count until newer
	// statistics arrive (assignedNow).
	AcquiredSince int `json:"acquiredSince,omitempty"`
	// Finished are the pool's runners that ended after running a job while no message had
	// named them yet (ScaleSetFinishedUnseen): each one's job is still open in the ledger.
	Finished []ScaleSetFinishedRunner `json:"finished,omitempty"`
	// CursorSession is the session whose message the ledger's cursor names.
	CursorSession string `json:"cursorSession,omitempty"`
	// StatisticsSession is the session whose message Statistics came from (empty: none yet,
	// or statistics taken before changeScaleSetSessionStatisticsOrder).
	StatisticsSession string `json:"statisticsSession,omitempty"`
	// ExcessSince is when the ledger began to count more open jobs than the statistics'
	// assigned count (zero: it does not); ScaleSetLedgerExcessHold later it is trimmed.
	ExcessSince time.Time `json:"excessSince,omitzero"`
	// NameOnlyLabels: the service kept only the set's name as its label when the pool last
	// brought the set to the spec (GHES without custom scale-set labels); the spec's other
	// labels route no job to it. The pool brings the set to the spec only when the spec
	// changes it (Key), so such a service is not asked again at every iteration.
	NameOnlyLabels bool `json:"nameOnlyLabels,omitempty"`
	// Left are sets the pool moved on from, waiting for their runners to end before they are
	// deleted.
	Left []LeftScaleSet `json:"left,omitempty"`
	// Recreated counts the sets created again after GitHub deleted them.
	Recreated int `json:"recreated,omitempty"`
	// Error is the last failure to bring the set up, or the last listener's end; RetryAt is
	// when the pool tries again.
	Error   string    `json:"error,omitempty"`
	RetryAt time.Time `json:"retryAt,omitzero"`
}

// ScaleSetListenerInput starts, or continues, a scale-set pool's listener.
type ScaleSetListenerInput struct {
	Pool       string `json:"pool"`
	Scope      Scope  `json:"scope"`
	ScaleSetID int64  `json:"scaleSetID"`
	// MaxCapacity is the pool's maximum, reported to the service with every poll.
	MaxCapacity int `json:"maxCapacity"`
	// State is set only by the listener itself when it continues as new.
	State *ScaleSetListenerState `json:"state,omitempty"`
	// ContinueAsNewAfter continues as new after this many polls (0: when the server suggests).
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
}

// ScaleSetListenerState is the listener's place: its session (nil: none open) and the last
// message handed to the pool. No token: the session's lives in the worker that opened it.
type ScaleSetListenerState struct {
	Session       *OpenScaleSetSessionOutput `json:"session,omitempty"`
	LastMessageID int64                      `json:"lastMessageID,omitempty"`
	// Offered are jobs the set was offered and had no room to acquire yet (sorted).
	Offered []int64 `json:"offered,omitempty"`
}

// ScaleSetMessageSignal hands a message to the pool; the pool folds it into its ledger
// (ApplyScaleSetMessage), so a message handed twice counts once.
type ScaleSetMessageSignal struct {
	// ScaleSetID and SessionID say whose message it is: a pool ignores a set it moved on from.
	ScaleSetID int64           `json:"scaleSetID"`
	SessionID  string          `json:"sessionID,omitempty"`
	Message    ScaleSetMessage `json:"message"`
	// Acquired are the jobs the listener acquired after reading the message (offered by it or
	// by an earlier one): the service's answer assigns them to the set then, while their
	// assigned messages may come many messages later (ApplyScaleSetAcquired).
	Acquired []int64 `json:"acquired,omitempty"`
}

// ScaleSetSessionOpened hands the pool the statistics a new session opened with.
type ScaleSetSessionOpened struct {
	ScaleSetID int64              `json:"scaleSetID"`
	SessionID  string             `json:"sessionID"`
	Statistics ScaleSetStatistics `json:"statistics"`
}

// ScaleSetCapacity is the pool's maximum, which the listener reports to the service.
type ScaleSetCapacity struct {
	MaxCapacity int `json:"maxCapacity"`
}

// ScaleSetListenerEnded tells the pool its listener of a set ended: Gone when GitHub no longer
// has the set (the pool creates it again), otherwise Reason says why.
type ScaleSetListenerEnded struct {
	ScaleSetID int64  `json:"scaleSetID"`
	Gone       bool   `json:"gone,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// ScaleSetListenerResult says why the listener ended.
type ScaleSetListenerResult struct {
	LastMessageID int64 `json:"lastMessageID"`
}
