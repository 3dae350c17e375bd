package workflows

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Scope says where runners register with GitHub. Exactly one field is set.
type Scope struct {
	// Repository is "owner/repo".
	Repository string `json:"repository,omitempty"`
	// Organization is the organization login.
	Organization string `json:"organization,omitempty"`
	// Enterprise is the enterprise slug.
	Enterprise string `json:"enterprise,omitempty"`
}

// String renders the scope as one keyword ("repo:owner/repo", "org:acme", "enterprise:slug"),
// the form used in the RunnerPoolScope search attribute and in logs.
func (s Scope) String() string {
	switch {
	case s.Repository != "":
		return "repo:" + s.Repository
	case s.Organization != "":
		return "org:" + s.Organization
	case s.Enterprise != "":
		return "enterprise:" + s.Enterprise
	}
	return ""
}

// Validate reports whether exactly one of the scope's fields is set.
func (s Scope) Validate() error {
	set := 0
	for _, v := range []string{s.Repository, s.Organization, s.Enterprise} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("exactly one of repository, organization or enterprise must be set")
	}
	return nil
}

// RunnerState is a runner's place in its lifecycle, as reported to its pool and kept in the
// RunnerState search attribute.
type RunnerState string

// The runner states.
const (
	RunnerPending     RunnerState = "pending"
	RunnerRegistering RunnerState = "registering"
	RunnerIdle        RunnerState = "idle"
	RunnerBusy        RunnerState = "busy"
	RunnerDraining    RunnerState = "draining"
	RunnerDone        RunnerState = "done"
	RunnerFailed      RunnerState = "failed"
)

// Terminal reports whether the runner workflow has ended in this state.
func (s RunnerState) Terminal() bool { return s == RunnerDone || s == RunnerFailed }

// RegistrationMode says how a runner gets its GitHub credentials.
type RegistrationMode string

// The registration modes.
const (
	// RegistrationJIT asks GitHub for a just-in-time runner configuration (ephemeral runners).
	RegistrationJIT RegistrationMode = "jit"
	// RegistrationToken hands the runner a registration token with which it configures itself
	// (persistent runners, GitHub Enterprise Server versions without JIT).
	RegistrationToken RegistrationMode = "token"
)

// RunnerSpec is the pool's runner settings, the part of a pool every runner workflow gets.
type RunnerSpec struct {
	Scope       Scope    `json:"scope"`
	Labels      []string `json:"labels"`
	RunnerGroup string   `json:"runnerGroup,omitempty"`
	Ephemeral   bool     `json:"ephemeral"`
	// Mode defaults to JIT for ephemeral runners and registration token for persistent ones.
	Mode RegistrationMode `json:"mode,omitempty"`
	// Namespace is the Kubernetes namespace of the runner's pod and secret.
	Namespace    string                 `json:"namespace"`
	Template     corev1.PodTemplateSpec `json:"template"`
	TemplateHash string                 `json:"templateHash"`
	// RegistrationTimeout bounds the wait for the runner to come online; zero means the policy default.
	RegistrationTimeout time.Duration `json:"registrationTimeout,omitempty"`
	// WorkFolder is the runner's work directory; empty means the runner's default.
	WorkFolder string `json:"workFolder,omitempty"`
	// ScaleSetID makes the runner a scale set's: its JIT configuration comes from the set and
	// its removal goes to the set's service (CreateScaleSetRunner, RemoveScaleSetRunner), no
	// REST call. Zero: a REST-registered runner, as every runner before scale sets.
	ScaleSetID int64 `json:"scaleSetID,omitempty"`
}

// SlotVolume binds one of the pod's volumes to a persistent volume claim of a stateful slot.
type SlotVolume struct {
	// VolumeName is the volume name used by the pod template's containers.
	VolumeName string `json:"volumeName"`
	// ClaimName is the PersistentVolumeClaim that outlives runners in this slot.
	ClaimName string `json:"claimName"`
}

// RunnerInput starts one runner workflow.
type RunnerInput struct {
	Pool string `json:"pool"`
	// Cluster is the named cluster the pool placed the runner on, fixed for its life: its
	// Kubernetes activities and its registration run on that cluster's task queues. Empty is
	// the default cluster (inputs written before clusters have none and run as they always did).
	Cluster string `json:"cluster,omitempty"`
	// Name is the runner's one name (pod, secret, GitHub runner), from RunnerName.
	Name string `json:"name"`
	// Slot is the stateful slot the runner fills (0-based); meaningful only with SlotVolumes.
	Slot        int          `json:"slot,omitempty"`
	SlotVolumes []SlotVolume `json:"slotVolumes,omitempty"`
	Spec        RunnerSpec   `json:"spec"`
	// Warm is a registration the pool minted ahead for this runner's name (a warm
	// registration: the runner at GitHub and its Secret exist already). The runner owns it from
	// its start, and its first attempt creates the pod without registering; nil: it registers.
	Warm *RegisterRunnerOutput `json:"warm,omitempty"`
	// PoolWatches is set by a pool that watches the runner's registration deadline itself
	// (changeWatchRegistration): the runner holds no timer of its own while it registers or
	// runs. The pool asks it to check its registration (SignalCheckRegistration) when it has
	// not reported idle or busy within its registration timeout, and the pool's runner listing
	// stands in for the periodic pod read (a runner whose pod ended goes offline and then gone
	// at GitHub, and the listing tells it). False: the runner keeps its own deadline timer.
	PoolWatches bool `json:"poolWatches,omitempty"`
	// Resume is set only by the runner workflow itself when it continues as new: the
	// registration and pod it already has and what it has observed. Nil on a first start.
	Resume *RunnerResume `json:"resume,omitempty"`
}

// RunnerResult is what a runner workflow returns when its runner is gone.
type RunnerResult struct {
	Name       string      `json:"name"`
	FinalState RunnerState `json:"finalState"`
	RunnerID   int64       `json:"runnerId,omitempty"`
	JobsRun    int         `json:"jobsRun"`
	// Reason says why the runner ended (job done, drained, evicted, registration failed, ...).
	Reason string `json:"reason,omitempty"`
}

// RunnerStateReport is a runner's state change, signalled to its pool (SignalRunnerState).
type RunnerStateReport struct {
	Runner       string      `json:"runner"`
	State        RunnerState `json:"state"`
	TemplateHash string      `json:"templateHash"`
	Slot         int         `json:"slot,omitempty"`
	RunnerID     int64       `json:"runnerId,omitempty"`
	Reason       string      `json:"reason,omitempty"`
	// JobID is the job a busy runner runs (from the in_progress notice), so the pool can end
	// that job's reservation when the runner leaves it, without waiting for the completed
	// webhook. Zero while the job is not known (busy seen only in a runner listing).
	JobID int64 `json:"jobId,omitempty"`
	// Busy says whether the runner still runs a job: a runner drained mid-job is draining and
	// busy; one leaving after its work ended (pod exited, job done) is draining and not busy.
	Busy bool `json:"busy,omitempty"`
	// Removing is set once the runner was force-removed: its pool holds its place (no
	// replacement, its stateful slot taken) until it has ended.
	Removing bool `json:"removing,omitempty"`
	// EndedJob is the job whose completed notice the runner got last, on an idle or final
	// report: the pool ends that job's reservation even if it never learned the runner took it
	// (the intake tells a pool's own runner, not the pool, when its job starts and ends).
	EndedJob int64 `json:"endedJob,omitempty"`
}

// RunnerStateBatch carries several runners' reports to their pool (SignalRunnerStates), in the
// order the worker's group commit took them; a runner sends its next report only once the last
// one was delivered, so each runner's reports keep their order. It carries no secret.
type RunnerStateBatch struct {
	Reports []RunnerStateReport `json:"reports"`
}

// ActivityReportRunnerState hands one runner report to its pool through the worker's group
// commit (activities.RunnerReports), as a local activity of the runner (RunnerReportPolicy): the
// reports of the runners a worker runs for one pool share a signal, at most one a
// RunnerReportPace.
const ActivityReportRunnerState = "ReportRunnerState"

// ReportRunnerStateInput is one report for one pool (ActivityReportRunnerState).
type ReportRunnerStateInput struct {
	Pool   string            `json:"pool"`
	Report RunnerStateReport `json:"report"`
}

// PodPhase is the pod's state as the pod watcher reports it; PodGone means the pod no longer exists.
type PodPhase string

// The pod phases a runner workflow reacts to.
const (
	PodPending   PodPhase = "Pending"
	PodRunning   PodPhase = "Running"
	PodSucceeded PodPhase = "Succeeded"
	PodFailed    PodPhase = "Failed"
	PodGone      PodPhase = "Gone"
)

// PodStatusSignal is a pod transition reported by the pod watcher (SignalPodStatus). The watcher
// may send the same status more than once; handlers are idempotent.
type PodStatusSignal struct {
	Pod   string   `json:"pod"`
	UID   string   `json:"uid,omitempty"`
	Phase PodPhase `json:"phase"`
	// Reason is the pod's status reason, e.g. "Evicted".
	Reason string `json:"reason,omitempty"`
	// Deleting is true once the pod has a deletion timestamp.
	Deleting bool `json:"deleting,omitempty"`
	// Scheduled is true once the pod is bound to a node (spec.nodeName set): a pod whose
	// credential waits for its scheduling (changeSecretAfterScheduling) may now have it.
	Scheduled bool `json:"scheduled,omitempty"`
}

// RunnerStatusSignal is the runner's GitHub-side status from a runner listing (SignalRunnerStatus).
type RunnerStatusSignal struct {
	Online bool `json:"online"`
	Busy   bool `json:"busy"`
	// Gone means GitHub no longer knows the runner.
	Gone bool `json:"gone,omitempty"`
}

// toldBy reports whether a runner that last reported state already knows what this listing
// says: a runner online and busy that reported busy, or online and idle that reported idle.
func (s RunnerStatusSignal) toldBy(state RunnerState) bool {
	switch {
	case s.Gone || !s.Online:
		return false
	case s.Busy:
		return state == RunnerBusy
	}
	return state == RunnerIdle
}

// JobSignal is a workflow_job event forwarded to the runner it names (SignalJobStarted,
// SignalJobCompleted). It costs no GitHub API call.
type JobSignal struct {
	JobID      int64  `json:"jobId"`
	RunnerName string `json:"runnerName"`
	Conclusion string `json:"conclusion,omitempty"`
	// QueuedAt and StartedAt are GitHub's created_at and started_at of the job: the start of
	// the scale-up latencies a job-started notice records, and evidence of when the runner was
	// online; zero when unknown.
	QueuedAt  time.Time `json:"queuedAt,omitzero"`
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// DrainRequest asks a runner or a pool to drain: finish current work, take no more, go away.
type DrainRequest struct {
	Reason string `json:"reason,omitempty"`
}

// CheckRegistrationRequest is the pool's SignalCheckRegistration: the runner checks its
// registration once its own registration timeout has passed (at once if it has).
type CheckRegistrationRequest struct{}

// ForceRemoveRequest removes a runner now, even while it runs a job (UpdateForceRemove,
// SignalForceRemove). Reason is required: it is recorded in the runner's history and names
// the runner's end.
type ForceRemoveRequest struct {
	Reason string `json:"reason"`
}

// ForceRemoveResult answers UpdateForceRemove: the request was recorded; the runner is
// leaving (its pod, registration and Secret go in that order) and ends on its own.
type ForceRemoveResult struct {
	State RunnerState `json:"state"`
	Busy  bool        `json:"busy"`
}

// ForceRemoveRunnerRequest asks a pool to force-remove one of its runners
// (UpdateForceRemoveRunner).
type ForceRemoveRunnerRequest struct {
	Runner string `json:"runner"`
	Reason string `json:"reason"`
}

// ForceRemoveRunnerResult answers UpdateForceRemoveRunner once the runner has the request.
type ForceRemoveRunnerResult struct {
	Runner string `json:"runner"`
}
