package workflows

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PoolSpec is one pool as a platform team writes it in YAML (see docs/pools.md). The scope is
// written flat — exactly one of repository, organization or enterprise — because that reads
// best in YAML. Pointer fields distinguish "not written" (default applies) from an explicit
// zero; WithDefaults fills them in.
type PoolSpec struct {
	// Name is the pool's name: a DNS label of at most MaxPoolNameLength characters.
	Name string `json:"name"`
	// Repository ("owner/repo"), Organization or Enterprise: where runners register.
	Repository   string `json:"repository,omitempty"`
	Organization string `json:"organization,omitempty"`
	Enterprise   string `json:"enterprise,omitempty"`
	// Labels are the runner labels jobs select with runs-on.
	Labels      []string `json:"labels"`
	RunnerGroup string   `json:"runnerGroup,omitempty"`
	// Ephemeral runners run one job each; default true.
	Ephemeral *bool `json:"ephemeral,omitempty"`
	// MinReplicas runners are kept even without demand; MaxReplicas (required) is never exceeded.
	MinReplicas int  `json:"minReplicas"`
	MaxReplicas *int `json:"maxReplicas,omitempty"`
	// MinIdle warm runners are kept on top of the busy ones.
	MinIdle int `json:"minIdle,omitempty"`
	// WarmRegistrations runner registrations are kept minted ahead, in quiet time (ephemeral
	// pools only): a burst's runners take them and make no GitHub call on their way up.
	WarmRegistrations int `json:"warmRegistrations,omitempty"`
	// ScaleDownDelay: no idle runner is removed this soon after a scale-out (anti-flap).
	ScaleDownDelay *metav1.Duration `json:"scaleDownDelay,omitempty"`
	// ReservationDuration: how long a queued job's reservation holds capacity.
	ReservationDuration *metav1.Duration `json:"reservationDuration,omitempty"`
	// RegistrationTimeout bounds the wait for a new runner to come online.
	RegistrationTimeout *metav1.Duration `json:"registrationTimeout,omitempty"`
	// Namespace of the runners' pods, secrets and claims; default "default".
	Namespace string `json:"namespace,omitempty"`
	// WorkFolder is the runner's work directory; empty means the runner's default.
	WorkFolder string `json:"workFolder,omitempty"`
	// Template is the runner pod; it must have a container named "runner".
	Template corev1.PodTemplateSpec `json:"template"`
	// VolumeClaimTemplates make the pool stateful: each slot keeps one claim per template, and
	// the next runner in the slot mounts the same claims (e.g. a docker layer cache).
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
	// Clusters, when set, is the ordered list of named clusters the pool places new runners on:
	// the first whose API answers (workflows/placement.go). Empty: the worker's default cluster.
	// Not part of the template hash: runners already running stay where they are.
	Clusters []string `json:"clusters,omitempty"`
	// ScheduledOverrides change min/max on a calendar (the first active one wins).
	ScheduledOverrides []ScheduledOverride `json:"scheduledOverrides,omitempty"`
	// Pull makes the pool read its demand from GitHub on a timer (pull_types.go); nil: webhooks only.
	Pull *PullSpec `json:"pull,omitempty"`
	// ScaleSet makes the pool a runner scale set's (scaleset_types.go); nil: webhooks and pull.
	ScaleSet *ScaleSetSpec `json:"scaleSet,omitempty"`
	// Prewarm makes the pool start runners for a workflow run's downstream jobs before GitHub
	// queues them, from the run's job graph and past run times (prewarm_types.go); nil or not
	// enabled: off.
	Prewarm *PrewarmSpec `json:"prewarm,omitempty"`
}

// ScheduledOverride replaces min and/or max between StartTime and EndTime, optionally
// recurring, as ARC's scheduledOverrides do. Times are RFC 3339; offsets are fixed (no DST).
type ScheduledOverride struct {
	StartTime      metav1.Time     `json:"startTime"`
	EndTime        metav1.Time     `json:"endTime"`
	RecurrenceRule *RecurrenceRule `json:"recurrenceRule,omitempty"`
	MinReplicas    *int            `json:"minReplicas,omitempty"`
	MaxReplicas    *int            `json:"maxReplicas,omitempty"`
}

// RecurrenceRule repeats an override's window every Frequency until UntilTime (if set).
type RecurrenceRule struct {
	// Frequency is Daily, Weekly, Monthly or Yearly.
	Frequency string       `json:"frequency"`
	UntilTime *metav1.Time `json:"untilTime,omitempty"`
}

// The recurrence frequencies.
const (
	FrequencyDaily   = "Daily"
	FrequencyWeekly  = "Weekly"
	FrequencyMonthly = "Monthly"
	FrequencyYearly  = "Yearly"
)

// PoolMode is whether the pool is scaling, paused, or draining to zero.
type PoolMode string

// The pool modes. Resume returns a paused or draining pool to active.
const (
	// PoolActive: the pool keeps the desired number of runners.
	PoolActive PoolMode = "active"
	// PoolPaused: the pool starts and drains nothing; runners keep working.
	PoolPaused PoolMode = "paused"
	// PoolDraining: the pool drains every idle runner, lets busy ones finish, and starts none.
	PoolDraining PoolMode = "draining"
)

// Bounds are the min, max and minIdle in force.
type Bounds struct {
	Min     int `json:"min"`
	Max     int `json:"max"`
	MinIdle int `json:"minIdle"`
}

// PoolInput starts (or continues) a pool workflow.
type PoolInput struct {
	// Spec is the pool at its first start; ignored when State is set.
	Spec PoolSpec `json:"spec"`
	// State is set only by the pool itself when it continues as new.
	State *PoolState `json:"state,omitempty"`
	// ContinueAsNewAfter makes the pool continue as new after this many loop iterations of one
	// run, in addition to the server's suggestion (a test knob; zero means only the suggestion).
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// ListenerContinueAsNewAfter is handed to the pool's scale-set listeners as their
	// ContinueAsNewAfter (a test knob like ContinueAsNewAfter; zero: the server's suggestion).
	ListenerContinueAsNewAfter int `json:"listenerContinueAsNewAfter,omitempty"`
}

// PoolResult is what a pool workflow returns; pools end only when cancelled or terminated.
type PoolResult struct{}

// PoolState is everything a pool knows, carried whole across continue-as-new. Slices rather
// than maps: workflow code must not depend on map order.
type PoolState struct {
	Spec         PoolSpec `json:"spec"`
	TemplateHash string   `json:"templateHash"`
	// Generation and NextSeq make runner names (RunnerName); both survive continue-as-new.
	Generation string `json:"generation"`
	NextSeq    int64  `json:"nextSeq"`
	// Scale is the operator's min/max, kept until an applied spec changes min or max.
	Scale      ScaleRequest     `json:"scale"`
	Mode       PoolMode         `json:"mode"`
	ModeReason string           `json:"modeReason,omitempty"`
	Runners    []PoolRunner     `json:"runners,omitempty"`
	Reserved   ReservationState `json:"reserved"`
	// LastDesired and LastScaleOut implement the scale-down delay.
	LastDesired  int       `json:"lastDesired"`
	LastScaleOut time.Time `json:"lastScaleOut,omitzero"`
	// Failures counts runners that failed in a row; starts back off until StartNotBefore.
	Failures       int       `json:"failures,omitempty"`
	StartNotBefore time.Time `json:"startNotBefore,omitzero"`
	NextListing    time.Time `json:"nextListing,omitzero"`
	// NextRunnerCheck and LastRunnerCheck schedule the check for runner workflows that ended
	// without a report (checkRunnerWorkflows).
	NextRunnerCheck time.Time `json:"nextRunnerCheck,omitzero"`
	LastRunnerCheck time.Time `json:"lastRunnerCheck,omitzero"`
	// LastJobCheck is when the last check of reserved jobs at GitHub (checkReservedJobs)
	// began; UnattributedEnds are when runners ended that had run a job the pool never learned
	// of (each stands for one reservation that is over) since then.
	LastJobCheck     time.Time        `json:"lastJobCheck,omitzero"`
	UnattributedEnds []time.Time      `json:"unattributedEnds,omitempty"`
	Orphans          []Orphan         `json:"orphans,omitempty"`
	Decisions        []Decision       `json:"decisions,omitempty"`
	Finished         []FinishedRunner `json:"finished,omitempty"`
	Totals           PoolTotals       `json:"totals"`
	// Applied is set by the first apply (its result is "created", later ones are not).
	Applied     bool                    `json:"applied,omitempty"`
	LastListing *ListRunnersResultBrief `json:"lastListing,omitempty"`
	// Warm are the registrations minted ahead and not yet taken by a runner, in mint order.
	// WarmFailures counts failed warm-registration calls in a row; warm work waits until
	// WarmNotBefore after one.
	Warm          []WarmRegistration `json:"warm,omitempty"`
	WarmFailures  int                `json:"warmFailures,omitempty"`
	WarmNotBefore time.Time          `json:"warmNotBefore,omitzero"`
	// WarmSpent are the Secrets taken warm registrations left in the warm namespace once their
	// runners copied them, removed when the pool is quiet (changeWarmApart).
	WarmSpent []SecretRef `json:"warmSpent,omitempty"`
	// ListingDemand is what the pool last asked of its scope's listing workflow
	// (changeSharedListing); nil when it asks nothing.
	ListingDemand *PoolListingDemand `json:"listingDemand,omitempty"`
	// Pull is the pull's state while the spec has a pull section.
	Pull *PullState `json:"pull,omitempty"`
	// Prewarm is the prewarm memory (runs followed, run times) while the spec has prewarm on
	// (pool_prewarm.go); nil otherwise.
	Prewarm *PrewarmState `json:"prewarm,omitempty"`
	// ScaleSet is the set's state while the spec has a scaleSet section (pool_scaleset.go).
	ScaleSet *PoolScaleSetState `json:"scaleSet,omitempty"`
}

// PoolRunner is one runner as its pool tracks it, from the runner's own reports.
type PoolRunner struct {
	Name string `json:"name"`
	// Cluster is the named cluster the runner was placed on; empty is the default cluster.
	Cluster      string      `json:"cluster,omitempty"`
	Seq          int64       `json:"seq"`
	TemplateHash string      `json:"templateHash"`
	State        RunnerState `json:"state"`
	// Busy stays true while a busy runner drains, until it reports idle or ends.
	Busy bool `json:"busy,omitempty"`
	// Stateful runners fill Slot and mount that slot's claims.
	Stateful  bool      `json:"stateful,omitempty"`
	Slot      int       `json:"slot"`
	StartedAt time.Time `json:"startedAt"`
	Since     time.Time `json:"since"`
	// Started is set once the runner's workflow exists (its child start was acknowledged).
	Started bool `json:"started,omitempty"`
	// Draining is set once the pool asked the runner to drain.
	Draining    bool   `json:"draining,omitempty"`
	DrainReason string `json:"drainReason,omitempty"`
	// Removing is set once the runner was force-removed (by the pool's update or its own
	// report): it holds its place (no replacement, its slot taken) until it has ended.
	Removing bool  `json:"removing,omitempty"`
	RunnerID int64 `json:"runnerId,omitempty"`
	// Listed is the runner's status in the last runner listing that mentioned it.
	Listed *RunnerStatusSignal `json:"listed,omitempty"`
	// JobID is the job the runner runs (from its own report, or the job's in_progress event);
	// its reservation ends when the runner leaves the job (reports idle or draining, takes
	// another job, or ends).
	JobID int64 `json:"jobId,omitempty"`
	// JobDone is set on an ephemeral runner once its job's completed event named it: the
	// runner is leaving (it runs one job) though its own end has not been reported yet, so it
	// neither counts as staying nor as busy, only as holding its capacity until it ends.
	JobDone bool `json:"jobDone,omitempty"`

	// Warm is set when the runner started with a warm registration.
	Warm bool `json:"warm,omitempty"`
	// Watched is set when the pool watches the runner's registration deadline
	// (RunnerInput.PoolWatches); CheckAskedAt is when it last asked the runner to check.
	Watched      bool      `json:"watched,omitempty"`
	CheckAskedAt time.Time `json:"checkAskedAt,omitzero"`
	// Blocked is set while the runner's pod is refused for a reason that clears by itself
	// (a full ResourceQuota), from the create-pod activity's reports (SignalRunnerBlocked).
	Blocked *RunnerBlock `json:"blocked,omitempty"`
}

// FinishedRunner remembers a runner that ended, for status and to tell late listings from orphans.
type FinishedRunner struct {
	Name   string      `json:"name"`
	State  RunnerState `json:"state"`
	At     time.Time   `json:"at"`
	Reason string      `json:"reason,omitempty"`
}

// Orphan is a runner GitHub lists under the pool's name prefix that the pool does not track
// (e.g. left by an earlier incarnation of the pool). Removing orphans is left to a later step.
type Orphan struct {
	Name      string    `json:"name"`
	ID        int64     `json:"id"`
	Online    bool      `json:"online"`
	Busy      bool      `json:"busy"`
	FirstSeen time.Time `json:"firstSeen"`
}

// Decision records one executed plan (or a change of desired count), for QueryStatus.
type Decision struct {
	At      time.Time `json:"at"`
	Desired int       `json:"desired"`
	Started []string  `json:"started,omitempty"`
	Drained []string  `json:"drained,omitempty"`
	Why     string    `json:"why"`
}

// PoolTotals count runners over the pool's life.
type PoolTotals struct {
	Started  int64 `json:"started"`
	Finished int64 `json:"finished"`
	Failed   int64 `json:"failed"`
}

// ApplyRequest replaces a pool's spec (UpdateApply). The name must stay the same.
type ApplyRequest struct {
	Spec PoolSpec `json:"spec"`
}

// ApplyResult says what an apply changed.
type ApplyResult struct {
	// Result is "created" (first apply), "configured" (spec changed) or "unchanged".
	Result       string `json:"result"`
	TemplateHash string `json:"templateHash"`
	// Rollout is true when the template hash changed: runners are being replaced.
	Rollout bool `json:"rollout,omitempty"`
}

// The ApplyResult results.
const (
	ApplyCreated    = "created"
	ApplyConfigured = "configured"
	ApplyUnchanged  = "unchanged"
)

// ScaleRequest sets the operator's min and/or max (UpdateScale); a nil field keeps its value.
type ScaleRequest struct {
	Min *int `json:"min,omitempty"`
	Max *int `json:"max,omitempty"`
}

// ScaleResult is the bounds in force after a scale.
type ScaleResult struct {
	Bounds Bounds `json:"bounds"`
}

// OperatorRequest carries an operator's reason for pause and resume (SignalPause, SignalResume);
// a pool's drain takes a DrainRequest like a runner's.
type OperatorRequest struct {
	Reason string `json:"reason,omitempty"`
}

// PoolStatus answers QueryStatus.
type PoolStatus struct {
	Name         string   `json:"name"`
	Spec         PoolSpec `json:"spec"`
	TemplateHash string   `json:"templateHash"`
	Generation   string   `json:"generation"`
	Mode         PoolMode `json:"mode"`
	ModeReason   string   `json:"modeReason,omitempty"`
	// Bounds are in force now: spec, then an active scheduled override, then the operator's scale.
	Bounds         Bounds       `json:"bounds"`
	OverrideActive bool         `json:"overrideActive,omitempty"`
	Scale          ScaleRequest `json:"scale"`
	Desired        int          `json:"desired"`
	Reservations   int          `json:"reservations"`
	// Predicted is the runners a prewarming pool warms for jobs it predicts (before Decide
	// caps them by the room the queued jobs leave); PredictedWhy names the jobs.
	Predicted    int    `json:"predicted,omitempty"`
	PredictedWhy string `json:"predictedWhy,omitempty"`
	// PrewarmLead is how long before a predicted job is due its runners start: the pool's
	// measured start latency (StartLatency); zero in a pool that does not prewarm.
	PrewarmLead time.Duration `json:"prewarmLead,omitempty"`
	// Prewarmed are the jobs of the runs the pool follows that GitHub queued after the pool
	// began warming runners for them (PrewarmedJobs), for `starter why`.
	Prewarmed      []PrewarmedJob      `json:"prewarmed,omitempty"`
	Reserved       []Reservation       `json:"reserved,omitempty"`
	RunnersByState map[RunnerState]int `json:"runnersByState"`
	Outdated       int                 `json:"outdated"`
	Runners        []PoolRunner        `json:"runners"`
	Orphans        []Orphan            `json:"orphans,omitempty"`
	Decisions      []Decision          `json:"decisions,omitempty"`
	Finished       []FinishedRunner    `json:"finished,omitempty"`
	Totals         PoolTotals          `json:"totals"`
	LastScaleOut   time.Time           `json:"lastScaleOut,omitzero"`
	// Why explains the desired count and anything held back (delay, capacity, backoff, pause).
	Why     string                  `json:"why,omitempty"`
	Listing *ListRunnersResultBrief `json:"listing,omitempty"`
	// Warm lists the warm registrations; WarmReady counts those a starting runner would take
	// now, WarmWanted how many the pool keeps (warmRegistrations capped by max; 0 while draining).
	Warm       []WarmRegistration `json:"warm,omitempty"`
	WarmReady  int                `json:"warmReady,omitempty"`
	WarmWanted int                `json:"warmWanted,omitempty"`
	// Blocked sums up the runners whose pods wait for room (a full ResourceQuota), by reason.
	Blocked []PoolBlock `json:"blocked,omitempty"`
	// Clusters counts the runners per cluster for a pool placed on clusters.
	Clusters []ClusterRunners `json:"clusters,omitempty"`
	// Pull is what the pool last read from GitHub, when its spec has a pull section.
	Pull *PullStatus `json:"pull,omitempty"`
	// ScaleSet is the set, its session, last message and GitHub's statistics, for a
	// scale-set pool.
	ScaleSet *PoolScaleSetState `json:"scaleSet,omitempty"`
}

// ListRunnersResultBrief summarises the last runner listing in PoolStatus.
type ListRunnersResultBrief struct {
	At     time.Time `json:"at"`
	Listed int       `json:"listed"`
	Error  string    `json:"error,omitempty"`
}

// PoolListingDemand is what the pool last asked of its scope's listing workflow.
type PoolListingDemand struct {
	Scope     Scope         `json:"scope"`
	Interval  time.Duration `json:"interval"`
	FastUntil time.Time     `json:"fastUntil,omitzero"`
}

// ClusterRunners counts a pool's runners in one cluster ("" is the default cluster).
type ClusterRunners struct {
	Cluster string `json:"cluster"`
	Runners int    `json:"runners"`
}
