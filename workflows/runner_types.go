package workflows

import "time"

// RunnerStatus is what a runner workflow answers to QueryStatus.
type RunnerStatus struct {
	Pool string `json:"pool"`
	Name string `json:"name"`
	// Cluster is the named cluster the runner lives in; empty is the default cluster.
	Cluster      string      `json:"cluster,omitempty"`
	State        RunnerState `json:"state"`
	TemplateHash string      `json:"templateHash"`
	Slot         int         `json:"slot,omitempty"`
	RunnerID     int64       `json:"runnerId,omitempty"`
	// Attempt counts registrations; it grows when a runner did not come online in time.
	Attempt  int      `json:"attempt"`
	PodPhase PodPhase `json:"podPhase,omitempty"`
	Online   bool     `json:"online"`
	Busy     bool     `json:"busy"`
	JobID    int64    `json:"jobId,omitempty"`
	JobsRun  int      `json:"jobsRun"`
	// Draining is true once a drain was requested.
	Draining bool   `json:"draining"`
	Reason   string `json:"reason,omitempty"`
	// PodReason is the pod's status reason as the pod watcher last reported it; PodCreatedAt
	// and OnlineAt are when this attempt's pod was created and its runner first seen online
	// (zero until then), for `starter why`.
	PodReason    string    `json:"podReason,omitempty"`
	PodCreatedAt time.Time `json:"podCreatedAt,omitzero"`
	OnlineAt     time.Time `json:"onlineAt,omitzero"`
	// CredentialWait is the credential step (changeSecretAfterScheduling) that failed and
	// waits for the runner's loop to take it up again; nil while none waits. Its activity is
	// no longer pending, so this is what tells `starter why` that a registration waits for
	// GitHub's budget or for its cluster.
	CredentialWait *StepWait `json:"credentialWait,omitempty"`
}

// StepWait is a step whose activity failed and is to be run again by the workflow's own loop.
type StepWait struct {
	// Activity is the activity type that failed.
	Activity    string `json:"activity"`
	FailureType string `json:"failureType,omitempty"`
	Failure     string `json:"failure"`
	// RetryAt is when the failure said to try again (a spent budget's reset); zero when it
	// named no time.
	RetryAt time.Time `json:"retryAt,omitzero"`
}

// DrainResult answers UpdateDrain: the request was recorded, and this is where the runner
// stands (a busy runner finishes its job first).
type DrainResult struct {
	State RunnerState `json:"state"`
	Busy  bool        `json:"busy"`
}

// RunnerResume is what a runner workflow carries across continue-as-new: the registration and
// pod it already has, and what it has observed so far. Only the runner workflow writes it.
type RunnerResume struct {
	Attempt    int    `json:"attempt"`
	Registered bool   `json:"registered"`
	RunnerID   int64  `json:"runnerId,omitempty"`
	SecretName string `json:"secretName"`
	SecretUID  string `json:"secretUid,omitempty"`
	RunnerURL  string `json:"runnerUrl,omitempty"`
	PodUID     string `json:"podUid"`
	// State is the state last reported to the pool.
	State    RunnerState        `json:"state"`
	Observed RunnerObservations `json:"observed"`
	// ReportedJob is the job last reported to the pool with the busy state.
	ReportedJob int64 `json:"reportedJob,omitempty"`
}

// RunnerObservations is what a runner workflow knows about its pod and its GitHub runner. Signal
// handlers record into it; the workflow's loop decides from it (see next). Times are workflow
// times.
type RunnerObservations struct {
	PodPhase    PodPhase `json:"podPhase,omitempty"`
	PodReason   string   `json:"podReason,omitempty"`
	PodDeleting bool     `json:"podDeleting,omitempty"`
	// Online is true once the runner was seen online in the current registration attempt.
	Online bool `json:"online"`
	// PodCreatedAt and OnlineAt are when this attempt's pod was created and the earliest
	// evidence of its runner being online (a listing, or a job starting on it), for the
	// scale-up latency metrics.
	PodCreatedAt time.Time `json:"podCreatedAt,omitzero"`
	OnlineAt     time.Time `json:"onlineAt,omitzero"`
	// OfflineSince is set when GitHub lists the runner offline after it was online.
	OfflineSince time.Time `json:"offlineSince,omitzero"`
	// Gone is set when GitHub no longer knows a runner that was online.
	Gone bool `json:"gone,omitempty"`
	// GoneAsk, when set, is when the runner asks GitHub by its id whether it is still
	// registered: a listing no longer had it (changeConfirmGone).
	GoneAsk time.Time `json:"goneAsk,omitzero"`
	// PodUnreadSince is when the first of the pod reads that failed began, with none
	// succeeding since: how long the runner's cluster has not answered (changeClusterLost).
	PodUnreadSince time.Time `json:"podUnreadSince,omitzero"`
	Busy           bool      `json:"busy"`
	JobID          int64     `json:"jobId,omitempty"`
	// JobsRun counts distinct completed jobs; RecentJobs keeps the last few completed job ids
	// so redelivered or late events are ignored.
	JobsRun    int     `json:"jobsRun"`
	RecentJobs []int64 `json:"recentJobs,omitempty"`
	// JobDoneAt is when an ephemeral runner's job completed: its pod is about to exit.
	JobDoneAt time.Time     `json:"jobDoneAt,omitzero"`
	Drain     *DrainRequest `json:"drain,omitempty"`
	// Force is the operator's force-remove request, once one arrived (the first is kept).
	Force *ForceRemoveRequest `json:"forceRemove,omitempty"`
	// AttemptStart is when the current attempt's pod was created (registration timeout base).
	AttemptStart time.Time `json:"attemptStart,omitzero"`
	// LastPodCheck is when the pod was last read or reported (pod check backstop base).
	LastPodCheck time.Time `json:"lastPodCheck,omitzero"`
	// RecheckAt, when later than the registration timeout, is when a registration check that
	// could not read the pod or GitHub asks again.
	RecheckAt time.Time `json:"recheckAt,omitzero"`
	// PodScheduled is set once the pod is bound to a node (a watcher signal or a pod read).
	PodScheduled bool `json:"podScheduled,omitempty"`
	// Credential is where this attempt's credential stands when its pod was created first
	// (changeSecretAfterScheduling); empty for an attempt that wrote its Secret before its pod.
	Credential CredentialStage `json:"credential,omitempty"`
	// CheckAsked is set when the pool asked this attempt to check its registration
	// (SignalCheckRegistration; only for a runner whose pool watches it).
	CheckAsked bool `json:"checkAsked,omitempty"`
}

// CredentialStage is where a runner's credential stands when its pod comes first
// (changeSecretAfterScheduling): the Secret exists in the runner's namespace only between
// CredentialInNamespace's start and CredentialSpent's.
type CredentialStage string

const (
	// CredentialAwaitingNode: the pod exists, unscheduled; no Secret yet (for a cold runner, no
	// registration either).
	CredentialAwaitingNode CredentialStage = "awaiting-node"
	// CredentialInNamespace: the pod is scheduled and its Secret written; the kubelet reads it
	// when it starts the runner's container.
	CredentialInNamespace CredentialStage = "in-namespace"
	// CredentialSpent: the runner's container started (its environment holds the credential)
	// or its runner connected: the Secret is deleted.
	CredentialSpent CredentialStage = "spent"
)
