package workflows

// This file decides what a runner does when its registration timeout passes without news of it
// being online: it asks the cluster and GitHub and acts on what they say, never on a guess. The
// decision is a pure function of the two answers, tested with one row per combination.

// podView is what the cluster said about the runner's pod when asked.
type podView int

const (
	// podUnreadable: the pod could not be read (the API server did not answer).
	podUnreadable podView = iota
	// podNotStarted: the pod exists but its runner has not started (Pending).
	podNotStarted
	// podStarted: the pod runs (Running).
	podStarted
	// podOver: the pod ended, is gone, or is being deleted.
	podOver
	// podClusterLost: the pod could not be read, and no read of it has succeeded for
	// ClusterLostAfter: its (named) cluster is taken as lost (changeClusterLost).
	podClusterLost
)

// githubView is what GitHub said about the runner's registration when asked.
type githubView int

const (
	// githubUnreadable: GitHub did not answer usefully (5xx, a spent budget, a timeout).
	githubUnreadable githubView = iota
	// githubNotFound: GitHub does not list the registration.
	githubNotFound
	// githubOffline: registered, not connected.
	githubOffline
	// githubOnline: connected and idle.
	githubOnline
	// githubBusy: connected and running a job.
	githubBusy
)

// verdictAction is what the runner does after its registration check.
type verdictAction int

const (
	// verdictOnline: the runner is online (or busy): carry on watching it.
	verdictOnline verdictAction = iota
	// verdictAskAgain: one of the two could not be read: wait and ask again, never tear down.
	verdictAskAgain
	// verdictWorkOver: the runner's work is over (its pod ended, or GitHub no longer lists it
	// while its pod runs: an ephemeral runner GitHub removed after its job, or a registration
	// someone removed): end the runner; the pool decides whether another is needed.
	verdictWorkOver
	// verdictNeverOnline: the runner never came online (its pod never started, or its runner
	// never connected): the one case for a fresh registration.
	verdictNeverOnline
	// verdictClusterLost: the runner's cluster has not answered for ClusterLostAfter and GitHub
	// says the runner is not connected: it never ran a job, so it leaves the cluster and its
	// pool places another runner where a cluster answers.
	verdictClusterLost
)

// registrationVerdict is the decision and why.
type registrationVerdict struct {
	action verdictAction
	reason string
	// githubDone: GitHub no longer has the registration, so nothing is left to unregister.
	githubDone bool
}

// decideRegistration is the registration check's table:
//
//	pod \ GitHub   unreadable  not found          offline        online / busy
//	unreadable     ask again   ask again          ask again      online
//	cluster lost   ask again   cluster lost (*)   cluster lost   online
//	not started    ask again   never online (*)   never online   online
//	started        ask again   work over (*)      never online   online
//	over           work over   work over (*)      work over      work over
//
// (*) GitHub has nothing left to unregister. A runner GitHub says is connected is online
// whatever the pod read said; anything else that could not be read is asked again.
func decideRegistration(pod podView, gh githubView) registrationVerdict {
	switch {
	case pod == podOver:
		return registrationVerdict{action: verdictWorkOver, reason: "pod ended", githubDone: gh == githubNotFound}
	case gh == githubOnline || gh == githubBusy:
		return registrationVerdict{action: verdictOnline}
	case gh == githubUnreadable:
		return registrationVerdict{action: verdictAskAgain, reason: "GitHub could not be read"}
	case pod == podClusterLost:
		return registrationVerdict{action: verdictClusterLost, githubDone: gh == githubNotFound,
			reason: "its cluster has not answered for " + ClusterLostAfter.String() + " and the runner never connected"}
	case pod == podUnreadable:
		return registrationVerdict{action: verdictAskAgain, reason: "the pod could not be read"}
	case gh == githubNotFound && pod == podStarted:
		return registrationVerdict{action: verdictWorkOver, reason: "runner no longer registered at GitHub while its pod runs", githubDone: true}
	case gh == githubNotFound:
		return registrationVerdict{action: verdictNeverOnline, reason: "pod never started and GitHub has no registration", githubDone: true}
	case pod == podNotStarted:
		return registrationVerdict{action: verdictNeverOnline, reason: "pod never started"}
	}
	return registrationVerdict{action: verdictNeverOnline, reason: "registered at GitHub but never connected"}
}

// viewOfPod reads a pod check's outcome.
func viewOfPod(phase PodPhase, deleting bool, readOK bool) podView {
	switch {
	case !readOK:
		return podUnreadable
	case deleting || phase == PodSucceeded || phase == PodFailed || phase == PodGone:
		return podOver
	case phase == PodRunning:
		return podStarted
	}
	return podNotStarted
}

// viewOfGitHub reads a GetRunner outcome.
func viewOfGitHub(out GetRunnerOutput, err error) githubView {
	switch {
	case err != nil:
		return githubUnreadable
	case !out.Found:
		return githubNotFound
	case out.Busy:
		return githubBusy
	case out.Online:
		return githubOnline
	}
	return githubOffline
}
