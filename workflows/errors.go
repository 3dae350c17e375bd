package workflows

// Error types of the Temporal application errors that activities return. Each external system's
// errors are classified once, in activities/, into these; workflows branch on the type, never on
// message text.
const (
	// ErrRateLimited: the API budget is spent; retried after the delay the server gave.
	ErrRateLimited = "RateLimited"
	// ErrRunnerBusy: GitHub refused to remove a runner that is running a job (422).
	ErrRunnerBusy = "RunnerBusy"
	// ErrNotOwned: an object with our name exists but is not ours; never adopted silently.
	ErrNotOwned = "NotOwned"
	// ErrInvalidSpec: the request can never succeed as written (bad template, bad labels, 422).
	ErrInvalidSpec = "InvalidSpec"
	// ErrForbidden: credentials lack the permission; an operator must act.
	ErrForbidden = "Forbidden"
	// ErrNotFound: the scope, runner group or object does not exist.
	ErrNotFound = "NotFound"
	// ErrTransient: a 5xx, a conflict or a network error; retried under the activity's policy.
	ErrTransient = "Transient"
	// ErrClusterNotServed: the worker that took the task holds no client for the runner's
	// cluster (a deployment whose workers disagree on their clusters); retried, so a worker
	// that serves it may take the task.
	ErrClusterNotServed = "ClusterNotServed"
	// ErrSessionConflict: a scale set already has a message session (409), another listener's
	// or one a lost worker left; retried until it ends.
	ErrSessionConflict = "SessionConflict"
	// ErrSessionLost: the scale set's message session is gone (ended, timed out, or held by a
	// worker that is no longer there); the listener opens a new one.
	ErrSessionLost = "SessionLost"
	// ErrScaleSetGone: GitHub no longer has the scale set (it deletes one idle for about a
	// week); the pool creates it again from its spec.
	ErrScaleSetGone = "ScaleSetGone"
	// ErrRunnerFailed: a runner workflow gave up (its runner never came online within
	// MaxRegistrationAttempts, or an activity failed for good); the workflow fails visibly.
	ErrRunnerFailed = "RunnerFailed"
)
