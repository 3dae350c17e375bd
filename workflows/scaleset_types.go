package workflows

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
