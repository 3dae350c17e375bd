package workflows

import (
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file is runnerflow's one policy file: every timeout, retry policy, interval and rate
// limit is a named value here with the reason for it. Call sites pick a policy; nothing mutates
// one. Zero values in user-facing specs fall back to the defaults below.

// ---- Defaults for user-facing settings ----

const (
	// DefaultRegistrationTimeout: a runner not online 10 minutes after its pod was created is
	// replaced (ARC uses the same bound; image pulls on cold nodes take minutes).
	DefaultRegistrationTimeout = 10 * time.Minute
	// MaxRegistrationAttempts: after this many pods failed to bring the runner online, the
	// runner workflow fails visibly instead of looping on a broken template or credential.
	MaxRegistrationAttempts = 3
	// DefaultScaleDownDelay: after a scale-out, wait this long before removing idle runners,
	// so a burst followed by a lull does not thrash pods (anti-flap).
	DefaultScaleDownDelay = 10 * time.Minute
	// DefaultReservationDuration: a queued job's reservation keeps capacity this long if its
	// completion never arrives (GitHub does not redeliver lost webhooks).
	DefaultReservationDuration = 10 * time.Minute
	// DefaultScaleWindow: events are batched for this long from the first event of a window, so
	// a burst of N webhooks costs about one pool update, not N.
	DefaultScaleWindow = 3 * time.Second
)

// ---- Runner workflow ----

const (
	// PodCheckInterval: the backstop for a missed pod-watcher signal. The watcher is the
	// primary source; this durable timer plus one cheap Kubernetes GET bounds how long a lost
	// signal can delay a runner.
	PodCheckInterval = 10 * time.Minute
	// BusyUnregisterRetryInterval: GitHub answers 422 while a runner is running a job; try again
	// at this pace until the job ends (jobs may run for hours, so no attempt limit).
	BusyUnregisterRetryInterval = 30 * time.Second
	// MaxJobDuration bounds the busy-unregister retries: GitHub cancels self-hosted jobs after
	// 5 days, so a runner busy longer than that is not coming back.
	MaxJobDuration = 5 * 24 * time.Hour
	// EphemeralExitGrace: after an ephemeral runner's job completed, its pod exits by itself
	// within seconds; if no pod signal arrives by then (missed watcher event), the runner is
	// cleaned up anyway instead of waiting for the next pod check.
	EphemeralExitGrace = 2 * time.Minute
	// StuckOfflineGrace: a runner seen online that GitHub later lists offline while its pod
	// still runs may be restarting (self-update, network blip); after this long it is stuck
	// (e.g. looping on a revoked credential) and is replaced.
	StuckOfflineGrace = 5 * time.Minute
	// RunnerHistoryLimit: a persistent runner's workflow continues as new beyond this many
	// history events (about a day of pod checks and job signals), so a worker restart replays
	// a short history; the server's own suggestion also triggers it.
	RunnerHistoryLimit = 2000
	// RecentJobsKept: a runner remembers this many completed job ids, enough to ignore a
	// redelivered or late job event without the list growing with a persistent runner's age.
	RecentJobsKept = 16
)

// ---- GitHub API budget ----

const (
	// DefaultGitHubPointsPerMinute: GitHub's secondary rate limit on REST calls, per credential:
	// 900 points a minute (a GET costs 1 point; a POST, PATCH, PUT or DELETE 5). This, not the
	// hourly budget, is what GitHub enforces on a burst; GitHub Enterprise Server administrators
	// may configure their own (the worker's --github-points-per-minute).
	DefaultGitHubPointsPerMinute = 900
	// GitHubWritePoints is what one write costs against the secondary limit. The GitHub task
	// queue is paced as if every activity were one write, so any mix of calls stays inside it.
	GitHubWritePoints = 5
	// GitHubPaceShare keeps the task-queue pace a little below the limit: the server's rate
	// limiter lets about a second's worth of tasks through at once on top of the steady pace.
	GitHubPaceShare = 0.95
	// GitHubBudgetShare: runnerflow spends this share of the credential's hourly (primary)
	// budget, as GitHub reports it in X-RateLimit-Limit; the rest is the reserve left for
	// retries, operators and other tools on the same credential. At the reserve, GitHub work
	// waits for X-RateLimit-Reset (a RateLimited error with that retry delay) instead of failing.
	GitHubBudgetShare = 0.8
)

// GitHubActivitiesPerSecond converts the secondary limit (points a minute; zero means
// DefaultGitHubPointsPerMinute) into the GitHub task queue's rate limit
// (TaskQueueActivitiesPerSecond), which the Temporal server enforces across all worker replicas
// together: on github.com, 2.85 activities a second, about 170 registrations a minute.
func GitHubActivitiesPerSecond(pointsPerMinute int) float64 {
	if pointsPerMinute <= 0 {
		pointsPerMinute = DefaultGitHubPointsPerMinute
	}
	return float64(pointsPerMinute) / 60 / GitHubWritePoints * GitHubPaceShare
}

// GitHubTaskQueuePartitions is how many partitions the Temporal server should give
// GitHubTaskQueue (dynamic config matching.numTaskqueueReadPartitions and
// matching.numTaskqueueWritePartitions for that queue; docs/operations.md). The server divides
// a queue's rate limit evenly among its partitions and writes each task to one of them at
// random, so with its default of four each partition dispatches a quarter of the pace and a
// burst waits for the fullest one: a 200-registration burst measured 1.48 × GitHub's pace with
// four partitions. One partition dispatches the whole pace in order; the GitHub queue carries a
// few calls a second, far below what one partition serves.
const GitHubTaskQueuePartitions = 1

// ---- Kubernetes API client ----

const (
	// DefaultKubernetesQPS and DefaultKubernetesBurst: the worker's client-side rate limit for
	// the Kubernetes API. client-go's own default (5 QPS, burst 10) caps a worker at about one
	// new runner a second: the benchmark measured a burst of 100 jobs taking 211 s at 5 QPS and
	// 34 s at 50 QPS. A runner's start is two requests, its Secret and then its pod (owned by
	// the Secret), for a warm runner too since warm registrations wait outside the runners'
	// namespace. 100 QPS keeps the 50 starts a second that one request a start gave at 50 QPS,
	// so a warm burst's runners get their pods as soon as before (docs/benchmarks.md). A
	// controller that starts pods in bursts asks that much of an API server; API Priority and
	// Fairness protects the server beyond it.
	DefaultKubernetesQPS   = 100
	DefaultKubernetesBurst = 200
)

// ---- Activity options ----

// retryNonRetryable lists the error types no retry can fix.
var retryNonRetryable = []string{ErrInvalidSpec, ErrForbidden, ErrNotOwned, ErrNotFound}

// The policies below come from a few small constructors, so each reads as its values alone.

// untilDone, as a ScheduleToClose, sets none: the call is retried for as long as it takes.
const untilDone time.Duration = 0

// activityOptions is a policy on a task queue with its timeouts and retries.
func activityOptions(queue string, startToClose, scheduleToClose time.Duration, retry *temporal.RetryPolicy) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    startToClose,
		ScheduleToCloseTimeout: scheduleToClose,
		RetryPolicy:            retry,
	}
}

// backoff retries from initial, doubling up to maxInterval, except on the nonRetryable error types.
func backoff(initial, maxInterval time.Duration, nonRetryable []string) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        initial,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		NonRetryableErrorTypes: nonRetryable,
	}
}

// fixedPace retries every interval, for a refusal that clears by itself (a busy runner).
func fixedPace(interval time.Duration, nonRetryable []string) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        interval,
		BackoffCoefficient:     1,
		MaximumInterval:        interval,
		NonRetryableErrorTypes: nonRetryable,
	}
}

// GitHubActivityPolicy: GitHub calls are short; transient failures back off to a minute. A rate
// limit error carries the server's reset time as its next retry delay, which overrides the
// backoff. ScheduleToClose is generous because the rate-limited queue itself may hold a task.
var GitHubActivityPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 2*time.Hour,
	backoff(time.Second, time.Minute, retryNonRetryable))

// RunGraphReadPolicy: reading a run's file is GitHub's usual short call, retried through
// transient errors and rate limits like the others, but given up after ten minutes: the graph
// only helps while the run's later jobs are still to come, and a caller without it decides as
// it would have without prewarming. Missing or unparseable files are results, not errors.
var RunGraphReadPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 10*time.Minute,
	backoff(time.Second, time.Minute, retryNonRetryable))

// UnregisterBusyPolicy: removing a runner retries through RunnerBusy (422) until the job ends,
// at a fixed pace, bounded by the longest job GitHub allows.
var UnregisterBusyPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, MaxJobDuration,
	fixedPace(BusyUnregisterRetryInterval, retryNonRetryable))

// ForceRemoveBusyGrace: a force-removed runner's pod is deleted before its registration, and
// GitHub keeps answering 422 (busy) until it notices the runner is gone and fails its job:
// seconds to a few minutes. Past this the removal fails visibly rather than wait for a job
// that will never end.
const ForceRemoveBusyGrace = 10 * time.Minute

// ForceUnregisterPolicy: unregistering a force-removed runner retries RunnerBusy every five
// seconds (GitHub is about to fail the job), bounded by ForceRemoveBusyGrace.
var ForceUnregisterPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, ForceRemoveBusyGrace,
	fixedPace(5*time.Second, retryNonRetryable))

// RegistrationRecheckInterval: a registration check that could not read the pod or GitHub asks
// again after this long (a runner is never torn down on a read that failed).
const RegistrationRecheckInterval = time.Minute

// RegistrationCheckPolicy: the registration check's read of GitHub gives up after two minutes
// (a spent budget waits for its reset far longer) and the check asks again at
// RegistrationRecheckInterval instead, so the runner's loop keeps taking its signals.
var RegistrationCheckPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 2*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// PodCheckPolicy: the backstop pod read repeats every PodCheckInterval anyway, so a failing
// check gives up after two minutes instead of holding up the runner's signal loop for an hour.
var PodCheckPolicy = activityOptions(TaskQueue, 30*time.Second, 2*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// CredentialStepPolicy, CredentialRegistrationPolicy and CredentialScaleSetRegistrationPolicy:
// a pod-first runner's credential steps (changeSecretAfterScheduling: the warm copy or the
// registration into its Secret, at GitHub or at the runner's scale set, the Secret's deletion
// once the runner started) give up after ClusterLostAfter, so a cluster that stops answering
// mid-step cannot hold its runner in the step (the Kubernetes, GitHub and scale-set policies
// retry for an hour or more) past the cluster-lost verdict. The runner then reads its pod
// first (a registration check RegistrationRecheckInterval later) and takes the step up again
// once the pod answers; a GitHub wait longer than this (a spent budget) is taken up the same way.
var (
	CredentialStepPolicy = activityOptions(TaskQueue, 30*time.Second, ClusterLostAfter,
		backoff(500*time.Millisecond, 30*time.Second, retryNonRetryable))
	CredentialRegistrationPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, ClusterLostAfter,
		backoff(time.Second, time.Minute, retryNonRetryable))
	CredentialScaleSetRegistrationPolicy = activityOptions(ScaleSetTaskQueue, 30*time.Second, ClusterLostAfter,
		backoff(time.Second, time.Minute, scaleSetNonRetryable))
)

// ClusterLostAfter: a named cluster that no pod read has reached for this long (from the start
// of the first read that failed) is taken as lost by a runner that never came online there:
// it leaves, and its pool places another runner on a cluster that answers. A read fails only
// after PodCheckPolicy's two minutes, so in practice it takes two failed reads a minute apart,
// five minutes of silence: well past the 30–90 s API server hangs runnerflow rides out in
// place (issue 17), and short beside a job left waiting for good.
const ClusterLostAfter = 3 * time.Minute

// ClusterReturnPolicy: a runner that left a lost cluster deletes its Secret there (its pod
// goes with the Secret) once the cluster answers again. Retries are the server's timers, not
// history events, so waiting a week costs the runner nothing; a cluster gone longer than that
// leaves objects labelled as runnerflow's for the operator.
var ClusterReturnPolicy = activityOptions(TaskQueue, 30*time.Second, 7*24*time.Hour,
	backoff(5*time.Second, time.Minute, retryNonRetryable))

// KubernetesActivityPolicy: API-server calls are short; a conflict or 5xx is retried with
// backoff to 30 s; an invalid pod template fails at once.
var KubernetesActivityPolicy = activityOptions(TaskQueue, 30*time.Second, time.Hour,
	backoff(500*time.Millisecond, 30*time.Second, retryNonRetryable))

// ClusterProbePolicy: the placement's probe of a cluster (ActivityProbeCluster) is one read
// of its API server. A cluster that has not answered within seconds, or that no worker serves
// (the task waits in its queue until ScheduleToClose), is skipped for this batch of runners;
// one attempt, since the next batch probes again.
var ClusterProbePolicy = workflow.ActivityOptions{
	TaskQueue:              TaskQueue,
	StartToCloseTimeout:    5 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Second,
	RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
}

// ForCluster is a policy run on a cluster's own task queues: the Kubernetes queue for policies
// on TaskQueue, the cluster's paced registration queue for those on GitHubTaskQueue. The
// default cluster ("") keeps the policy as it is, so runners that name no cluster issue
// exactly the commands they always did.
func ForCluster(policy workflow.ActivityOptions, cluster string) workflow.ActivityOptions {
	switch {
	case cluster == "":
	case policy.TaskQueue == GitHubTaskQueue:
		policy.TaskQueue = ClusterGitHubTaskQueue(cluster)
	default:
		policy.TaskQueue = ClusterTaskQueue(cluster)
	}
	return policy
}

// ---- Child workflows ----

// RunnerChildPolicy: runner workflows outlive the pool run that started them (continue-as-new,
// pool termination), so the pool never takes a busy runner down with it.
func RunnerChildPolicy(workflowID string) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            workflowID,
		TaskQueue:             TaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
}

// RunnerStartPolicy: starting a batch of runner workflows (StartRunnerWorkflows) is a few
// Temporal calls; a Temporal that does not answer is retried for as long as it takes, since
// every runner of the batch answers a job that waits. A start refused for good (invalid
// arguments) fails that runner only, in the activity's result.
var RunnerStartPolicy = activityOptions(TaskQueue, time.Minute, untilDone,
	backoff(200*time.Millisecond, 30*time.Second, retryNonRetryable))

// ReadJobsPolicy: reading reserved jobs at GitHub (the pool's check for lost job events) is a
// few GETs on the GitHub queue; the check comes again ReservedJobCheckInterval later anyway, so
// a failing one gives up after a few tries.
var ReadJobsPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 2*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

const (
	// ReservedJobCheckAfter: a runner idle this long while a reservation no runner serves is
	// held makes the pool read that job at GitHub. GitHub hands a queued job to a fitting idle
	// runner within seconds; a minute rules out a burst's ordinary lag.
	ReservedJobCheckAfter = time.Minute
	// ReservedJobCheckInterval: checks of reserved jobs come no closer than this, so a job that
	// is really still queued (its labels fit no online runner) costs a read every 2 minutes.
	ReservedJobCheckInterval = 2 * time.Minute
	// ReservedJobCheckMax: at most this many jobs are read in one check (one GET each, a point
	// of the secondary limit each); the rest wait for the next check.
	ReservedJobCheckMax = 20
	// ReservedJobCheckSettle: a check for a runner that ended after a job the pool never
	// learned of waits this long, so the ends of a burst share one check.
	ReservedJobCheckSettle = 5 * time.Second
	// ReservedJobCheckSpacing: checks prompted by such ends come no closer than this (at most
	// 40 reads a minute while events are being lost).
	ReservedJobCheckSpacing = 30 * time.Second
	// UnattributedEndHold: such an end lowers the reservations the pool counts for at most
	// this long when no check can say which job it was, so a job still queued is not kept
	// from its runner for longer.
	UnattributedEndHold = 2 * time.Minute
	// ReservationRenewalsBeforeCheck: a reservation renewed this often with no runner of the
	// pool online for its job (20 minutes or more at the default reservationDuration) has its
	// job read at GitHub without waiting for an idle runner. One renewal is a runner slow to
	// come online (an image pull, an API-server hiccup); a second means none came for two
	// durations (a bad image, a quota never raised, a paused pool), long enough for the job's
	// completion to have been lost, and one GET settles it.
	ReservationRenewalsBeforeCheck = 2
	// StaleReservationCheckInterval: such jobs are read again no sooner than this, about once a
	// renewal at the default reservationDuration: at most ReservedJobCheckMax GETs per 10
	// minutes (120 an hour, 2.4% of a 5 000 budget) for a pool whose runners never come online.
	StaleReservationCheckInterval = DefaultReservationDuration
)

// RunnerStatusesPolicy: telling a batch of runners their listing (SignalRunnerStatuses) is a few
// Temporal calls; retried for a minute, then given up as a failed signal to a runner always
// was: a runner that missed its listing learns its state from its job's notices and its own
// registration check.
var RunnerStatusesPolicy = activityOptions(TaskQueue, 30*time.Second, time.Minute,
	backoff(200*time.Millisecond, 10*time.Second, nil))

// PoolRunnerCheckPolicy: the pool's check for runner workflows that ended without a report is
// one visibility listing; it runs again at the next interval anyway, so a failing one gives up
// after a few tries.
var PoolRunnerCheckPolicy = activityOptions(TaskQueue, 30*time.Second, 2*time.Minute,
	backoff(time.Second, 30*time.Second, nil))

const (
	// PoolRunnerEndGrace: a runner workflow that ended this long ago and is still tracked did
	// not report its end (a final report is delivered in well under a second); the pool then
	// forgets it. Shorter would race a report in flight.
	PoolRunnerEndGrace = 30 * time.Second
	// PoolRunnerCheckOverlap: each check looks back this far before the previous one, so a
	// runner whose end reached Temporal's visibility late (it is eventually consistent) is
	// still found.
	PoolRunnerCheckOverlap = 10 * time.Minute
)

const (
	// RunnerStartBatchSize bounds the runners one StartRunnerWorkflows call starts, so its
	// input (one RunnerInput each, a few KiB with a pod template) stays far below Temporal's
	// payload limit and a retry repeats little.
	RunnerStartBatchSize = 100
	// RunnerStartConcurrency: how many of a batch's starts one activity has in flight. Each is
	// one round trip to the frontend; sixteen keep a 100-runner batch under a second without
	// crowding the server on a small machine.
	RunnerStartConcurrency = 16
)

// ---- Scale window / starter ----

const (
	// ReleasedJobMemory: a completed job is remembered this long so that its queued event,
	// delivered late or redelivered by hand, reserves nothing; a later one costs at most one
	// reservation for its duration, and the memory stays small (one entry per recent job).
	ReleasedJobMemory = time.Hour
	// ScaleWindowMaxEvents: a window closes early after this many events, so a sustained flood
	// cannot grow one window's history without bound (the next window takes the rest).
	ScaleWindowMaxEvents = 2000
	// PoolTableRefreshInterval: the starter re-lists running pool workflows this often, and on
	// an unroutable event at most once per interval, so a new pool is routable within seconds
	// while a flood of foreign events costs at most one listing per interval.
	PoolTableRefreshInterval = 10 * time.Second
	// WebhookTemporalTimeout: the starter's Temporal calls for one delivery must finish inside
	// GitHub's 10-second delivery timeout, so a slow Temporal shows as 503 in GitHub's delivery
	// log instead of a timeout. 8 s leaves 2 s for the network, reading the body and the
	// answer; every second more is a second a busy Temporal has to accept the signal before the
	// delivery is refused (at 5 s, bursts on a loaded server were refused by the dozen).
	WebhookTemporalTimeout = 8 * time.Second
	// WebhookWindowSignalTimeout: a batch's signal to a scale window keeps its own deadline,
	// counted from when its oldest event was queued, past the deliveries that stopped waiting
	// for it: a delivery refused (503) because Temporal was slow still has its event signalled
	// when Temporal takes it within this time, so the pool hears of the job at once and GitHub's
	// redelivery, which the window deduplicates, is the safety net instead of the path. An
	// event that waited longer is dropped from the intake's queue (its delivery was refused long
	// before; the redelivery carries it), so a Temporal outage cannot grow the queue for ever.
	WebhookWindowSignalTimeout = 30 * time.Second
	// WebhookMaxBodyBytes: GitHub caps webhook payloads at 25 MB; anything larger is not GitHub.
	WebhookMaxBodyBytes = 25 << 20
)

// ReservationUpdatePolicy: the scale window's update to its pool waits for the pool to apply
// the batch (a pool busy continuing-as-new may take a moment, a pool whose worker is down may
// take an hour). Retries are safe: the update id names the window's run and batch, and the batch
// is keyed by job, so re-applying it changes nothing. There is no ScheduleToClose: the events
// were acknowledged to GitHub, which will not send them again, so the window holds its batch
// until the pool takes it (only a pool that no longer exists, or refuses the batch, ends the
// wait). Retries add nothing to the window's history; the UI shows the pending attempt.
var ReservationUpdatePolicy = activityOptions(TaskQueue, 30*time.Second, untilDone,
	backoff(200*time.Millisecond, 30*time.Second, retryNonRetryable))

// ---- Runner reports ----

const (
	// RunnerReportPace: a worker signals a pool its runners' reports at most once this long
	// (the group commit of activities.RunnerReports); the reports that arrive meanwhile share
	// the next signal. A burst of 250 runners reported 12–15 times a second into one pool, and a
	// workflow taking a signal every 70–80 ms had its workflow task handed out 35–68 s late
	// (docs/benchmarks.md): each signal is a write to its history that the task's dispatch
	// waits behind. One second keeps a burst to about one signal a second per worker into a
	// pool, and costs a quiet pool nothing: a lone report leaves at once.
	RunnerReportPace = time.Second
	// RunnerReportHold: a report not signalled this long after it was queued leaves the queue
	// unsent; its local activity gave up long before and its retry queued it again.
	RunnerReportHold = 10 * time.Second
	// RunnerReportBatchMax bounds one SignalRunnerStates: a report is about 300 bytes, so 500
	// stay far below Temporal's payload limit (2 MB by default).
	RunnerReportBatchMax = 500
)

// RunnerReportPolicy: the runner's local activity that hands a report to the worker's group
// commit and waits for the signal that carries it. Local, because it runs inside the runner's
// workflow task and records one marker, where a signal to the pool cost the runner two events
// and a workflow task to learn it was delivered. Retried for a few seconds (Temporal busy);
// after ScheduleToClose the runner signals its pool itself, as runners before it did.
var RunnerReportPolicy = workflow.LocalActivityOptions{
	StartToCloseTimeout:    5 * time.Second,
	ScheduleToCloseTimeout: 20 * time.Second,
	RetryPolicy:            backoff(200*time.Millisecond, 2*time.Second, nil),
}

// ---- Pool workflow ----

const (
	// MaxPoolReplicas bounds maxReplicas: the pool carries one entry per runner across
	// continue-as-new, and that state must stay far below Temporal's 2 MB payload limit.
	MaxPoolReplicas = 1000
	// PoolListingIntervalStarting: while any runner is still registering the listing runs this
	// often, because it is how a new runner is seen online (GitHub sends no webhook for it).
	PoolListingIntervalStarting = 15 * time.Second
	// PoolDecisionsKept and PoolFinishedKept bound the status history carried across
	// continue-as-new; enough to explain the last few minutes of scaling.
	PoolDecisionsKept = 20
	PoolFinishedKept  = 50
	// PoolFailureBackoff doubles per runner that failed in a row, up to PoolFailureBackoffMax,
	// so a broken template or credential does not churn runners in a tight loop.
	PoolFailureBackoff    = 30 * time.Second
	PoolFailureBackoffMax = 10 * time.Minute
)

// ---- Warm registrations ----

const (
	// WarmRegistrationRefreshAge: GitHub removes an ephemeral runner that has not connected for
	// a day, so a warm registration is replaced after 20 hours; the 4 left cover a refresh that
	// waits for a quiet pool or for the hourly budget's reset.
	WarmRegistrationRefreshAge = 20 * time.Hour
	// WarmRegistrationMaxAge: a warm registration this old is never handed to a runner (GitHub
	// may drop it before the runner connects); it is only removed.
	WarmRegistrationMaxAge = 23 * time.Hour
	// WarmRegistrationBatch: at most this many warm mints or removals of one pool are in flight
	// at once, so a burst that begins meanwhile finds at most that many of them ahead of its own
	// registrations on the paced GitHub queue.
	WarmRegistrationBatch = 2
	// WarmRefillSettle: warm work waits this long after the pool last started runners. A burst's
	// webhooks reach the pool over a few scale windows (3 s each); a pool that looks quiet
	// between two of them has not seen the whole burst, and a refill then would put GitHub calls
	// on the burst's hot path.
	WarmRefillSettle = 10 * time.Second
	// WarmRetryDelay doubles per warm-registration call that failed in a row, up to
	// WarmRetryDelayMax, so a refused credential or a spent budget is not called in a loop.
	WarmRetryDelay    = 30 * time.Second
	WarmRetryDelayMax = 10 * time.Minute
	// WarmSpentBatch: the Secrets of at most this many taken warm registrations go in one
	// DeleteCollection; 100 runner names keep its label selector a few kilobytes long, well
	// inside the API server's limits on a request line.
	WarmSpentBatch = 100
)

// WarmSecretsPolicy: removing taken warm registrations' Secrets from the warm namespace is
// quiet-time work on the Kubernetes queue; like WarmRegistrationPolicy it gives up after ten
// minutes (the pool keeps the names and tries again at its next quiet moment).
var WarmSecretsPolicy = activityOptions(TaskQueue, 30*time.Second, 10*time.Minute,
	backoff(time.Second, time.Minute, retryNonRetryable))

// WarmRegistrationPolicy: minting or removing a warm registration is quiet-time work on the
// GitHub queue. It gives up after ten minutes rather than hold the pool's continue-as-new behind
// a spent budget for hours; the pool tries again later and removes what a failed mint left.
var WarmRegistrationPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 10*time.Minute,
	backoff(time.Second, time.Minute, retryNonRetryable))

// PoolListingPolicy: a listing is a status refresh that repeats at the next interval anyway, so
// it gives up after a few minutes rather than queueing behind a spent GitHub budget for hours.
var PoolListingPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 5*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// ---- Pull-based scaling (pool_pull.go) ----

const (
	// DefaultPullInterval: a pool with a pull section reads GitHub this often unless its spec
	// says otherwise (ARC's default sync period); webhooks, where there are any, act sooner.
	DefaultPullInterval = time.Minute
	// MinPullInterval: no pool reads more often, so 50 pools of 20 repositories stay far inside
	// the hourly budget even when nothing is cached (a 304 costs none).
	MinPullInterval = 10 * time.Second
	// MaxPullRepositories bounds the repositories a pool reads, and so its calls per interval.
	MaxPullRepositories = 20
	// PullRunsPerListing: one page of runs a status and repository (GitHub's largest page); a
	// backlog beyond it counts as that page until its oldest runs start.
	PullRunsPerListing = 100
	// PullJobListingsPerRead bounds the run job listings of one read (all repositories): with
	// the runs listings, a read stays a small share of GitHub's 900 points a minute however
	// long the backlog; runs beyond it keep their last answer until a later read has room.
	PullJobListingsPerRead = 100
	// PullJobsPerPage: a run's jobs are read 100 a page, GitHub's largest page.
	PullJobsPerPage = 100
	// PullJobPagesPerRun: a run's jobs are read to their third page of 100 (300 jobs): a
	// matrix generates at most 256 jobs a run (GitHub's documented limit), so only a run with
	// many jobs besides its matrix has more, and the pool then holds its runners rather than
	// scale down on a partial answer (PulledRun.Unread). Each page counts against
	// PullJobListingsPerRead.
	PullJobPagesPerRun = 3
	// PullAnswerMaxAge: a pool counts on a pull answer no older than this (its shared read
	// failing since, GitHub down or the budget at its reserve): past it the pool scales on its
	// reservations alone for that repository and says so in its status. Five minutes is five
	// reads at the default interval, and what PoolPullPolicy gives one read.
	PullAnswerMaxAge = 5 * time.Minute
	// PullShareResendAfter: a repository's pull workflow tells a pool its unchanged part again
	// this often, so a pool that heard nothing for PullShareSilenceMax knows the workflow is
	// gone (terminated by hand) rather than quiet. At rest that is one signal a pool and
	// repository per half hour.
	PullShareResendAfter = 30 * time.Minute
	// PullShareSilenceMax: a pool that heard nothing of a repository for this long counts its
	// answer stale and asks again (a signal-with-start restarts the workflow).
	PullShareSilenceMax = PullShareResendAfter + PullAnswerMaxAge
	// PullShareIdleExit: a repository's pull workflow no pool has asked anything of for this
	// long ends; the next demand starts it again.
	PullShareIdleExit = 10 * time.Minute
	// PullShareReadsPerRun: the workflow continues as new after this many reads (a read and
	// its signals are a handful of events), as the scope listing does.
	PullShareReadsPerRun = 100
	// DefaultPullScaleUpThreshold, DefaultPullScaleDownThreshold, DefaultPullScaleUpFactor and
	// DefaultPullScaleDownFactor are ARC's PercentageRunnersBusy defaults.
	DefaultPullScaleUpThreshold   = 0.8
	DefaultPullScaleDownThreshold = 0.3
	DefaultPullScaleUpFactor      = 1.3
	DefaultPullScaleDownFactor    = 0.7
)

// PoolPullPolicy: a pull is a read that repeats at the next interval anyway, so it gives up
// after a few minutes rather than queueing behind a spent GitHub budget; on the GitHub queue,
// paced with every other GitHub call.
var PoolPullPolicy = activityOptions(GitHubTaskQueue, time.Minute, 5*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// ---- Workers: each workflow queue's task slots and pollers ----

// QueueWorker is what one worker process gives a workflow task queue: how many of its
// workflow tasks run at once, and the bounds of the pollers the SDK scales with the backlog
// the server reports.
type QueueWorker struct {
	WorkflowTaskSlots int
	MinPollers        int
	MaxPollers        int
}

// DecisionQueueWorker serves DecisionTaskQueue: a few dozen deciders whose every task answers
// many runners or an operator. A burst gives them a task each per window or message, never
// hundreds, so a few slots always free; two pollers always waiting, so a decision's task is
// taken the moment it is queued rather than when a poller comes back from the runners' queue.
var DecisionQueueWorker = QueueWorker{WorkflowTaskSlots: 50, MinPollers: 2, MaxPollers: 10}

// RunnerQueueWorker serves TaskQueue's workflow tasks, the runners': a burst queues one or
// more per runner at once. The SDK's own defaults (1000 slots, pollers scaled from 1 to 100
// with the backlog), which drained a 500-runner burst's backlog before the deciders moved out
// (docs/benchmarks.md); the deciders no longer compete for these slots or polls.
var RunnerQueueWorker = QueueWorker{WorkflowTaskSlots: 1000, MinPollers: 1, MaxPollers: 100}

// ---- Worker memory: the sticky workflow cache ----

// StickyWorkflowCacheSize bounds the workflows a worker process keeps in memory between their
// workflow tasks (the Temporal SDK's sticky cache, 10 000 by default, which kept every idle
// runner). A cached runner workflow holds about 40 KiB of live memory (its state and a
// coroutine stack of about 20 KiB) for as long as it sits idle, hours at a time, and the
// garbage collector's headroom adds to the heap part; an evicted one costs nothing until it
// is told something, and then a fetch and replay of its history (1–2 ms of CPU for a history
// of under a hundred events, about 40 ms near RunnerHistoryLimit, where the runner continues
// as new). The least recently used go first, so pools, scale windows and the runners of a
// burst stay cached and the runners idle longest are replayed. 1000 holds a pool's largest
// burst (MaxPoolReplicas). With it, 5000 idle runners cost the worker about 41 KiB each
// instead of about 100 (docs/benchmarks.md, figure 5, with the wake-up cost); the worker's
// --sticky-workflow-cache-size overrides it.
const StickyWorkflowCacheSize = 1000

// ---- Reconciliation: ReconcileWorkflow on a Temporal Schedule ----

const (
	// DefaultReconcileInterval: the Schedule starts a reconcile this often (the worker's
	// --reconcile-interval). Orphans cost a registration GitHub lists and a Secret or pod in the
	// cluster, nothing urgent; a run costs a listing per scope and a status query per pool.
	DefaultReconcileInterval = 5 * time.Minute
	// ReconcileGrace: an object is removed only when two looks this far apart both found it
	// orphaned (GitHub lists no creation time, and a runner's registration, Secret and pod exist
	// a moment before its pool's status or Temporal shows its workflow), and a pod or Secret only
	// once this old. ReconcileInput.Grace overrides it.
	ReconcileGrace = 2 * time.Minute
	// ReconcileBatch: at most this many removals of one run are in flight at once, so an
	// incident's hundreds of orphans do not crowd the paced GitHub queue ahead of registrations.
	ReconcileBatch = 10
	// ReconcileRunTimeout bounds one run: a run stuck behind a spent GitHub budget ends, and the
	// Schedule, which skips a start while a run is going (ReconcileOverlap), starts the next.
	ReconcileRunTimeout = time.Hour
	// ReconcileCatchupWindow: a start missed while the Temporal server was down is made up only
	// this late; after that the next interval's run does the same work.
	ReconcileCatchupWindow = time.Minute
)

// ReconcileOverlap: one reconcile at a time; a start that finds one running is skipped.
const ReconcileOverlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP

// ReconcileReadPolicy: reconcile's reads of Temporal (pools, runner workflows) and Kubernetes
// (pods, Secrets) are short; after five minutes the run fails and the next one starts afresh.
var ReconcileReadPolicy = activityOptions(TaskQueue, 30*time.Second, 5*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// ReconcileListingPolicy: a scope's runner listing on the paced GitHub queue, given up after a
// few minutes like a pool's (the scope is reported as not listed; the next run lists it).
var ReconcileListingPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 5*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// ReconcileRemoveRegistrationPolicy: one DELETE of an orphaned registration on the GitHub queue.
// RunnerBusy (422) is not retried: a busy orphan is reported and left with its pod and Secret,
// and the next run looks again. Ten minutes covers a short wait for the hour's budget.
var ReconcileRemoveRegistrationPolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 10*time.Minute,
	backoff(time.Second, time.Minute, append(append([]string{}, retryNonRetryable...), ErrRunnerBusy)))

// ---- Reconcile: redelivering failed webhook deliveries ----

const (
	// ReconcileRedeliverWindow: a run looks at the hook's deliveries of the last hour: twelve
	// runs at the default interval, so runs that failed meanwhile still catch an event; and no
	// longer than a pool remembers a job whose reservation ended (ReleasedJobMemory), so a
	// redelivered `queued` event of a finished job never reserves a runner.
	ReconcileRedeliverWindow = ReleasedJobMemory
	// ReconcileDeliveryPages bounds the listing of one run to 20 pages of 100 attempts (20 of
	// the hour's requests); a busier hook is reported truncated and its oldest attempts wait.
	ReconcileDeliveryPages = 20
	// ReconcileDeliveryPageSize: GitHub's largest page, the fewest requests per window.
	ReconcileDeliveryPageSize = 100
	// ReconcileRedeliverMax: at most this many redeliveries a run (each a write, 5 points of
	// the secondary limit: 200 are about a minute of it), so an outage's backlog does not crowd
	// out the registrations its jobs then need; the rest go in the next run.
	ReconcileRedeliverMax = 200
)

// ReconcileDeliveryListingPolicy: the hook's listing on the paced GitHub queue, one activity
// for all its pages (two minutes for 20 pages); given up after a few minutes like a scope's
// listing, and the next run lists again.
var ReconcileDeliveryListingPolicy = activityOptions(GitHubTaskQueue, 2*time.Minute, 5*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// ReconcileRedeliverPolicy: one POST asking GitHub to redeliver, tried once: a retry after an
// answer lost on the way could redeliver an event twice. A failed try is reported, not
// remembered, and the next run redelivers the event only if GitHub's listing shows no
// redelivery of it.
var ReconcileRedeliverPolicy = workflow.ActivityOptions{
	TaskQueue:              GitHubTaskQueue,
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Minute,
	RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
}

// ReconcileProbePolicy: the probe of a hook whose newest delivery failed (a ping, or the
// redelivery of a delivery that succeeded): its loss costs nothing, so unlike a failed event's
// redelivery it is retried; given up after two minutes, and the next run probes again.
var ReconcileProbePolicy = activityOptions(GitHubTaskQueue, 30*time.Second, 2*time.Minute,
	backoff(time.Second, 30*time.Second, retryNonRetryable))

// ReconcileDeletePolicy: deleting an orphaned pod or Secret (NotFound is success); a failure is
// reported after five minutes and the next run tries again.
var ReconcileDeletePolicy = activityOptions(TaskQueue, 30*time.Second, 5*time.Minute,
	backoff(500*time.Millisecond, 30*time.Second, retryNonRetryable))

// ---- Pod watcher: one elected watcher per cluster ----

// One worker replica at a time runs the pod watcher, elected through a coordination.k8s.io
// Lease with client-go's leader election, so each pod's end costs one signal whatever the
// number of replicas; the others stand by. These are client-go's defaults for the control
// plane's own components (kube-scheduler, kube-controller-manager), whose trade-offs are ours.
const (
	// PodWatcherLeaseDuration: a standby takes the Lease only after it has seen no renewal for
	// this long, so a killed leader (which cannot release it) leaves pods unwatched for about
	// this plus one PodWatcherLeaseRetryPeriod. Pods that end meanwhile are not lost: the new
	// leader's informer starts with a full listing and signals every ended pod it finds.
	PodWatcherLeaseDuration = 15 * time.Second
	// PodWatcherLeaseRenewDeadline: a leader that could not renew for this long stops watching,
	// seconds before any standby may take the Lease, so two replicas never signal at once even
	// when the leader is cut off from the API server rather than dead.
	PodWatcherLeaseRenewDeadline = 10 * time.Second
	// PodWatcherLeaseRetryPeriod: the leader renews and the standbys read the Lease this often
	// (a standby's wait is jittered up to 2.2 times): one Lease write every 2 s per cluster,
	// whatever the load, and a clean handover (a stopping leader releases the Lease) within one
	// standby's read.
	PodWatcherLeaseRetryPeriod = 2 * time.Second
)

// PodWatcherBindingSignalsInFlight and PodWatcherSignalsInFlight are how many signals the pod
// watcher sends at once: bindings apart from the rest. A pod created before its Secret costs
// its runner a signal on its start's path (its binding: the runner writes the credential on
// hearing it, and the container waits for that) and two off it (its start, which retires the
// Secret, and its end), so a burst of 500 runners is 1 500 signals, each a round trip to a
// busy Temporal frontend. Four at a time for all of them (the watcher's first default) queued
// the bindings: in a warm 500 burst each pod's binding reached its runner 16 s (p50) after the
// pod's creation, its start 13 s after its credential, where the simulated kubelet took under a
// second for each. Sixty-four at a time for all of them moved that wait onto the runners' task
// queue and the intake (bindings heard in 2.7 s, but the runners' tasks taken 8.7 s later, three
// deliveries answered 503, two status queries timed out): the two cores' Temporal was the
// bound, not the watcher (docs/benchmarks.md, "Where a warm start's pod time goes"). So the
// bindings go first, a few at once, and the rest keep the first pace behind them.
const (
	PodWatcherBindingSignalsInFlight = 16
	PodWatcherSignalsInFlight        = 4
)

// ---- Waits at rest that a test world shortens ----

// These three are variables, not constants, for one reason: the integration tests must see each
// of them pass, and at their production lengths they cost the suite minutes per test. A test
// world shortens them before its worker starts (testworld.ShortenRestWaits); nothing else
// assigns them but the replay test.
//
// A length is part of what a pool decides, not only of how long a timer runs: it sets when the
// pool next wakes, and so whether the pool replaces its kept timer (waitWithKeptTimer). A
// history recorded with other lengths can therefore issue other commands on replay, so a
// history recorded in a test world carries the lengths it ran with beside it
// (<name>-<build>.rest-waits, RestWaits as JSON) and the replay test replays it under them. For
// the same reason, changing one of these lengths in a release is a change to gate like any other.
var (
	// PoolRunnerCheckInterval: at rest the pool checks for runner workflows that ended without a
	// report this often (while runners register, at the listing's short interval). Every 2 min
	// cost 50 pools 3 000 actions an hour at rest for a case an operator causes by hand.
	PoolRunnerCheckInterval = 5 * time.Minute
	// PoolListingInterval: while a pool has runners it lists them at GitHub this often (one
	// paginated call per pool), to learn online/busy changes and find orphans cheaply.
	PoolListingInterval = 2 * time.Minute
	// QuotaRetryMax bounds the doubling wait between tries of a pod create refused for quota
	// (QuotaRetryInitial): a pod starts at most a minute after room appears.
	QuotaRetryMax = time.Minute
)

// RestWaits are the three waits at rest as one value: what a test world sets, and what a
// history recorded in one replays under.
type RestWaits struct {
	PoolRunnerCheckInterval time.Duration `json:"poolRunnerCheckInterval"`
	PoolListingInterval     time.Duration `json:"poolListingInterval"`
	QuotaRetryMax           time.Duration `json:"quotaRetryMax"`
}

// ProductionRestWaits are the waits as built, before anything shortened them.
var ProductionRestWaits = CurrentRestWaits()

// CurrentRestWaits are the waits in force.
func CurrentRestWaits() RestWaits {
	return RestWaits{PoolRunnerCheckInterval: PoolRunnerCheckInterval, PoolListingInterval: PoolListingInterval, QuotaRetryMax: QuotaRetryMax}
}

// Apply puts the waits in force; call it before any worker runs.
func (w RestWaits) Apply() {
	PoolRunnerCheckInterval, PoolListingInterval, QuotaRetryMax = w.PoolRunnerCheckInterval, w.PoolListingInterval, w.QuotaRetryMax
}

// ---- Scope listing: one runner listing per GitHub scope, shared by its pools ----

const (
	// ScopeListingIntervalStarting: while any pool of the scope has runners registering, the
	// scope is listed this often, because the listing is how a new runner is seen online
	// (GitHub sends no webhook for it). The same pace a pool kept for itself before.
	ScopeListingIntervalStarting = PoolListingIntervalStarting
	// ScopeListingFastHold: a pool with runners registering asks for the short interval for
	// this long, and asks again ScopeListingFastRenew before it lapses while runners still
	// register. So a burst costs the pool one demand every two minutes, not one per runner or
	// per change between "registering" and "all online"; a scope stays on the short interval at
	// most this long after its last runner came online.
	ScopeListingFastHold  = 2 * time.Minute
	ScopeListingFastRenew = 30 * time.Second
	// ScopeListingResendAfter: a pool whose runners did not change is told them again this
	// often anyway, so its status shows a recent listing, a pool whose state drifted (reset by
	// hand) is corrected, and a pool that no longer exists is found (the signal fails) and dropped.
	ScopeListingResendAfter = 10 * time.Minute
	// ScopeListingIdleExit: a listing workflow no pool has asked anything of for this long ends;
	// the next demand starts it again (signal-with-start).
	ScopeListingIdleExit = 10 * time.Minute
	// ScopeListingListingsPerRun: the workflow continues as new after this many listings (or
	// when the server suggests it), so its history stays short: a listing of a scope with a
	// thousand runners is about 70 KB of activity result.
	ScopeListingListingsPerRun = 100
)

// ScopeListingPolicy: the shared listing is a status refresh on the paced GitHub queue that
// repeats at the next interval anyway; it gives up after a few minutes rather than queue
// behind a spent budget for hours, as a pool's own listing did.
var ScopeListingPolicy = PoolListingPolicy

// ListingDemandPolicy: a pool's demand is one signal-with-start to Temporal itself; a Temporal
// that does not answer is retried for as long as it takes (the pool's worker cannot make
// progress without it either), and the pool's continue-as-new waits for it.
var ListingDemandPolicy = activityOptions(TaskQueue, 30*time.Second, untilDone,
	backoff(200*time.Millisecond, 30*time.Second, retryNonRetryable))

// ---- Quota waits: pods the namespace has no room for ----

// An admission refusal that clears by itself is waited for, not failed on. Which ones: the
// ResourceQuota plugin's "exceeded quota" (pods end, an operator raises the quota) and "status
// unknown for quota" (the quota controller has not counted a new or changed quota yet; seconds).
// Every other refusal fails fast, because nothing but an operator changes it: RBAC ("User ...
// cannot create resource"), the quota's "failed quota: ... must specify" (the pod template
// lacks the requests or limits the quota tracks), a namespace being deleted, PodSecurity,
// LimitRange and admission webhooks (a policy engine's denial is a decision, not a state).
const (
	// QuotaRetryInitial: a refused pod create is tried again this soon, doubling per attempt up
	// to QuotaRetryMax. Room frees when a job's pod ends, minutes apart; each try is one refused
	// API request and one activity attempt (a billable action), so a runner waiting an hour
	// costs about 60 tries, and a pod starts at most a minute after room appears.
	QuotaRetryInitial = 5 * time.Second
)

// QuotaRetryDelay is the wait before attempt+1 of a pod create refused for quota (attempt
// counts from 1). It is the refusal's NextRetryDelay, which overrides the call's backoff; the
// call's own policy still bounds the whole wait: KubernetesActivityPolicy's ScheduleToClose (an
// hour) for CreateRunnerPod. A runner still refused after that fails as before, visibly, with
// the quota's message; by then its job's reservation has expired and the pool no longer counts
// on it.
func QuotaRetryDelay(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	return min(QuotaRetryInitial<<min(attempt-1, 16), QuotaRetryMax)
}

// QuotaReportAttempt says whether a refused attempt reports the wait to the pool
// (SignalRunnerBlocked): the first and then attempts 2, 4, 8, ... (about 7 reports in an hour),
// so a report lost or sent while the pool continued as new is repeated, never every retry.
func QuotaReportAttempt(attempt int) bool {
	return attempt >= 1 && attempt&(attempt-1) == 0
}

// ---- Runners that never come online; reservations counted from their events' own times ----

// LateReservationHold: a queued job's reservation counts its duration from its event's own
// time (WorkflowJobEvent.At), so a batch that reaches its pool late (its pool could not run)
// does not extend it; but a reservation whose duration ran out before its pool could take it
// still holds capacity this long after the pool took it (never longer than the duration): the
// pool starts the job's runner at its next decision, and that runner, kept by the scale-down
// delay, comes online and takes a job GitHub still has queued. Without it, a job queued more
// than reservationDuration before an outage ended would never get a runner. Two minutes is a
// few decisions' and listings' worth, short beside the duration it caps.
const LateReservationHold = 2 * time.Minute

// ---- Runner scale sets (the Actions service) ----
//
// GitHub documents neither the Actions service's limits nor its timings; the values below are
// what its official client (github.com/actions/scaleset) and ARC's listener assume, with
// Temporal doing the retrying (the client's own retries are switched off).

// scaleSetNonRetryable: besides the usual, a lost session or a deleted set is the listener's
// to handle (open a new session, create the set again), not a retry's.
var scaleSetNonRetryable = append(slices.Clone(retryNonRetryable), ErrSessionLost, ErrScaleSetGone)

// ScaleSetCompletedKept: a scale-set pool remembers this many completed jobs, so a late event
// of a finished job does not count it again; a burst's completions fit many times over.
const ScaleSetCompletedKept = 1000

// ScaleSetLedgerExcessHold: a scale-set pool's ledger may count more open jobs than the
// statistics' assigned count for this long before its oldest waiting jobs are let go
// (BoundScaleSetLedger). In a burst the ledger leads by a message or two, seconds apart; a
// truncated backlog arrives within a few polls; a minute covers both several times over and
// bounds a runner kept for a job the service no longer assigns the set.
const ScaleSetLedgerExcessHold = time.Minute

// ScaleSetOffersKept: a listener keeps at most this many offered jobs it had no room to
// acquire (about 10 bytes each in its state), more than any set's maximum should be.
const ScaleSetOffersKept = 1000

// ScaleSetFinishedHold: a runner that ended after a job no message had named it at yet counts
// as that job done for at most this long. The message naming it comes within seconds (the
// listener hands messages over as they come); the hold only bounds how long a message that
// never comes can keep a waiting job from a runner.
const ScaleSetFinishedHold = 2 * time.Minute

// ScaleSetActivityPolicy: calls to the Actions service (create, update or delete a set, a
// runner's JIT configuration, a runner's removal) are short; 5xx and 429 back off to a minute,
// a Retry-After from the service overriding the backoff. A 401 drops the worker's cached admin
// token, so the next attempt fetches a fresh one.
var ScaleSetActivityPolicy = activityOptions(ScaleSetTaskQueue, 30*time.Second, time.Hour,
	backoff(time.Second, time.Minute, scaleSetNonRetryable))

// ScaleSetRunnerRemovalPolicy: the service refuses to remove a runner while its job runs
// (JobStillRunning, as REST's 422); try again at the busy pace until the job ends.
var ScaleSetRunnerRemovalPolicy = activityOptions(ScaleSetTaskQueue, 30*time.Second, MaxJobDuration,
	fixedPace(BusyUnregisterRetryInterval, scaleSetNonRetryable))

// ScaleSetSessionConflictRetry: a set has one message session; while another is open (another
// listener's, or one a lost worker left until the service ends it after minutes without a
// poll) opening a session is retried at this pace, without limit: the wait shows in the
// activity's attempts and last failure, and never crash-loops a process.
const ScaleSetSessionConflictRetry = 30 * time.Second

// ScaleSetListenersToldBound: a worker that stops keeps its listener queue open, after its
// sessions began closing, until each session's listener has been told (its next call there
// answers SessionLost and it opens the next session on a worker that stays), at most this
// long: a listener's next call comes within a workflow task, well under a second at rest and
// seconds in a burst. A listener slower than this finds the queue closed and waits out
// ScaleSetPollPolicy's ScheduleToStart instead.
const ScaleSetListenersToldBound = 5 * time.Second

// ScaleSetSessionOpenPolicy: opening a session retries 409 (SessionConflict) and the service's
// failures at ScaleSetSessionConflictRetry.
var ScaleSetSessionOpenPolicy = activityOptions(ScaleSetTaskQueue, 30*time.Second, untilDone,
	backoff(5*time.Second, ScaleSetSessionConflictRetry, scaleSetNonRetryable))

// ScaleSetPollHeartbeat: the long poll (up to about 50 s at the service) heartbeats at this
// pace, so a worker that died is noticed within ScaleSetPollPolicy's heartbeat timeout rather
// than at the end of the poll.
const ScaleSetPollHeartbeat = 5 * time.Second

// sessionWorkerRetry: calls on a session's worker queue retry briefly (ten attempts, with
// Retry-After overriding the backoff); a lost worker is noticed by ScheduleToStart instead.
func sessionWorkerRetry() *temporal.RetryPolicy {
	retry := backoff(time.Second, time.Minute, scaleSetNonRetryable)
	retry.MaximumAttempts = 10
	return retry
}

// ScaleSetPollPolicy: one long poll, a heartbeating activity on the session's worker queue (the
// choice for a wait of up to a minute: a timer plus a short check would cost a Temporal action
// per check and lose the service's immediate answer). ScheduleToStart notices that the worker
// holding the session is gone (its queue has no poller); the listener then opens a new
// session. Failures are retried briefly on the same worker; Retry-After overrides the backoff.
var ScaleSetPollPolicy = workflow.ActivityOptions{
	ScheduleToStartTimeout: 30 * time.Second,
	StartToCloseTimeout:    2 * time.Minute,
	HeartbeatTimeout:       4 * ScaleSetPollHeartbeat,
	RetryPolicy:            sessionWorkerRetry(),
}

// ScaleSetSessionCallPolicy: acknowledging a message and closing a session run on the
// session's worker queue; short, with the same notice of a lost worker as the poll.
var ScaleSetSessionCallPolicy = workflow.ActivityOptions{
	ScheduleToStartTimeout: 30 * time.Second,
	StartToCloseTimeout:    30 * time.Second,
	RetryPolicy:            sessionWorkerRetry(),
}

// UnmatchedJobsMax: the unmatched-jobs workflow keeps this many of the newest queued jobs no
// pool fits — enough for an hour of a busy organization's mislabelled jobs, small enough that
// its state (about 200 bytes a job) stays far below a payload's limit across continue-as-new.
const UnmatchedJobsMax = 500

// ScaleSetListenerRestartDelay: a set that could not be brought to the spec, or a listener
// that ended (or did not start) for another reason than the set's deletion, is tried again
// after this long; the pool's loop waits for it on its timer, so a lasting failure costs one
// attempt a minute, visible in the pool's status.
const ScaleSetListenerRestartDelay = time.Minute

// ScaleSetListenerChildPolicy: a set's listener outlives the pool run that started it
// (continue-as-new), so a message session is never dropped for the pool's housekeeping; a new
// listener of the same set may follow one that ended.
func ScaleSetListenerChildPolicy(workflowID string) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            workflowID,
		TaskQueue:             TaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
}

// ScaleSetForcedRunnerRemovalPolicy: removing a force-removed scale-set runner (its pod is
// gone, its job about to fail) retries the service's busy refusal as ForceUnregisterPolicy
// retries REST's, bounded by ForceRemoveBusyGrace.
var ScaleSetForcedRunnerRemovalPolicy = activityOptions(ScaleSetTaskQueue, 30*time.Second, ForceRemoveBusyGrace,
	fixedPace(5*time.Second, scaleSetNonRetryable))

// ---- Prewarm: predicting when a run's downstream jobs are queued (prewarm_predict.go) ----

const (
	// PrewarmDurationQuantile: a dependency still running is predicted to finish at its start
	// plus this quantile of its recent run times. A low one, because the prediction says when
	// to have runners ready: a prediction earlier than the real finish costs a runner's idle
	// seconds, a later one makes the job wait, which is what prewarming exists to avoid. With
	// the 25th percentile the runners are ready in about three runs of four; in the fourth
	// they are already starting when the job is queued. A lower one (p10) would double the
	// idle time of runs near the median for the few fast ones: for a job whose run times
	// spread by ±10 %, p25 keeps a downstream job's idle runner time near the 10 % of its
	// useful time that issue 39 allows. A high one (p90) would be late in nine runs of ten.
	// The median, measured in four runs of the benchmark's pipelines (run times spread
	// ±25 %), cut the idle time from 20–24 % of the jobs' to 11–15 %, but left the median
	// downstream job waiting 0.3–1.5 s for its runner, against 2–9 ms (docs/benchmarks.md).
	PrewarmDurationQuantile = 0.25
	// PrewarmMinSamples: fewer recent run times than this predict nothing. With five, the
	// 25th percentile by nearest rank is the second fastest run, so one unusually fast run
	// (a cache hit, an early exit) never sets the prediction alone.
	PrewarmMinSamples = 5
	// PrewarmDurationsKept: the run times kept per job and workflow, newest last. Of twenty the
	// quantile is the fifth fastest: a job that got faster is followed after five runs, one
	// that got slower after sixteen (meanwhile its runners come early and idle, never late).
	// A longer memory would follow a changed job more slowly still, and a pool carries its
	// run times across continue-as-new.
	PrewarmDurationsKept = 20
)

// PrewarmPredictPolicy is the policy Predict applies when its input names none.
var PrewarmPredictPolicy = PredictPolicy{
	Quantile:   PrewarmDurationQuantile,
	MinSamples: PrewarmMinSamples,
	Kept:       PrewarmDurationsKept,
}

// ---- Prewarm: warming a pool ahead of predicted jobs (pool_prewarm.go, prewarm_plan.go) ----

const (
	// DefaultPrewarmGrace: runners warmed for a job wait this long past the time it was
	// predicted to be queued, then go. The prediction takes the 25th percentile of a
	// dependency's run times, so in most runs the job comes later than predicted, by the
	// spread of its dependencies' run times: two minutes covers a ±10 % spread on jobs up to
	// about twenty minutes, and bounds the idle time a missed prediction costs per runner.
	DefaultPrewarmGrace = 2 * time.Minute
	// MaxPrewarmGrace: a longer grace keeps idle runners for a prediction that has failed
	// longer than most jobs take; past it the pool is better off starting cold.
	MaxPrewarmGrace = 30 * time.Minute
	// PrewarmStartLatency: how long before a job's predicted queue time its runners start,
	// until the pool has measured its own (PrewarmLatenciesMin starts). A warm start measured
	// 21–22 s from webhook to runner online on this machine (pod create → runner online
	// 14–15 s, docs/benchmarks.md); 30 s leaves room for a cold registration's GitHub call.
	// Runners early by the difference idle for it; late ones make the job wait.
	PrewarmStartLatency = 30 * time.Second
	// PrewarmLatencyQuantile: the pool's measured start latency is this quantile of its last
	// PrewarmLatenciesKept starts (the pool deciding to start a runner → the runner online). A
	// high one: a runner ready a few seconds early idles for them, one late makes the job
	// wait, which is what prewarming exists to avoid.
	PrewarmLatencyQuantile = 0.75
	// PrewarmLatenciesKept and PrewarmLatenciesMin: the starts measured and kept, and how many
	// the measure needs before it replaces PrewarmStartLatency; a pool's starts vary with its
	// image and nodes, so twenty follow a change within a burst.
	PrewarmLatenciesKept = 20
	PrewarmLatenciesMin  = 5
	// PrewarmRunJobsKept bounds the jobs kept of one run (a matrix of hundreds of jobs): the
	// rest are not followed, so the run's prediction sees fewer of them. With the bounds
	// below, a pool's prewarm memory stays within PrewarmStateBytesMax at worst.
	PrewarmRunJobsKept = 50
	// PrewarmRunsKept bounds the runs a pool follows at once (carried across continue-as-new):
	// with graphs of at most PrewarmGraphBytesMax and at most PrewarmRunJobsKept jobs seen,
	// 20 runs stay within PrewarmStateBytesMax. A new run beyond it pushes out the one heard from least recently, whose prediction is
	// the stalest.
	PrewarmRunsKept = 20
	// PrewarmRunIdleForget: a run no event has been heard of for this long is forgotten
	// (finished, or its last events lost); a run's jobs follow each other within minutes.
	PrewarmRunIdleForget = time.Hour
	// PrewarmWorkflowsKept bounds the workflows whose run times a pool keeps (PrewarmDurationsKept
	// each, per job): the least recently run is forgotten first.
	PrewarmWorkflowsKept = 20
	// PrewarmPathsKept bounds the workflow files' paths a pool remembers (PrewarmState.Paths),
	// each saving one GitHub call per later run of its workflow. More than the
	// PrewarmWorkflowsKept whose run times are kept, since a workflow too new or too rare to
	// predict from still has its runs read; the least recently read is forgotten first, and
	// a forgotten one costs its next run one more call, nothing else.
	PrewarmPathsKept = 32
	// PrewarmPathMax: the bytes (as JSON) of a path the pool remembers. A workflow file's
	// path is ".github/workflows/" and a file name (at most 255 bytes on GitHub); a longer
	// one is not remembered, and its runs are read in two calls.
	PrewarmPathMax = 320
	// PrewarmJobsKept bounds the jobs of one workflow whose run times are kept: a file with
	// more jobs predicts only from the first ones seen. Thirty covers pipelines of a few
	// stages and keeps the run times within PrewarmStateBytesMax beside the runs.
	PrewarmJobsKept = 30
	// PrewarmGraphJobsMax: a run whose file has more jobs than this is not predicted: its
	// graph would crowd the pool's state (PrewarmRunsKept) for a prediction few pools need.
	PrewarmGraphJobsMax = 50
	// PrewarmGraphTextMax: the bytes (as JSON writes them) a graph's id, name, label or if:
	// keeps in the pool's state (boundRunGraph). Only the 1 MB file bounds them as written;
	// ids and names of a few words and labels like "ubuntu-24.04-arm" are far shorter. A
	// longer name cannot be matched to events (the job is predicted nothing), a longer label
	// leaves the job's pool unknown, a longer if: is kept cut (Predict needs only that there
	// is one), and a longer id refuses the graph.
	PrewarmGraphTextMax = 64
	// PrewarmGraphLabelsMax: a job with more runs-on labels than this keeps none (its pool
	// unknown, predicted nothing); runners carry a handful.
	PrewarmGraphLabelsMax = 8
	// PrewarmGraphBytesMax: a graph whose kept form is over this (as JSON) is refused
	// (PrewarmGraphTooLarge) and its run falls back to no prediction: needs lists are
	// bounded only by the job count. With PrewarmRunsKept runs it holds the graphs to
	// 160 KB of the state; a pipeline of a dozen jobs takes 2–3 KB.
	PrewarmGraphBytesMax = 8 << 10
	// PrewarmSeenNameMax: the bytes (as JSON) a heard job's or workflow's name keeps. Twice
	// PrewarmGraphTextMax, so a cut name still starts with any name a graph keeps and its
	// " (" (a matrix instance's is matched by that and its closing parenthesis, which the
	// cut keeps), and is too long to equal one.
	PrewarmSeenNameMax = 2 * PrewarmGraphTextMax
	// PrewarmStateBytesMax: what a pool's prewarm memory (PrewarmState) takes at most as
	// JSON with every bound above at its worst; a test holds it. It is carried across
	// continue-as-new in the pool's state, whose payload Temporal refuses past 2 MB: half
	// of that leaves the other half to the pool's runners and reservations.
	PrewarmStateBytesMax = 1 << 20
)
