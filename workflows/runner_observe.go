package workflows

import (
	"fmt"
	"slices"
	"time"
)

// This file holds the runner workflow's decisions as pure functions over RunnerObservations:
// what a signal means (record*) and what to do next (next). No workflow calls, so they are
// tested with plain tables.

// watchLimits are the per-runner settings the decisions depend on.
type watchLimits struct {
	registrationTimeout time.Duration
	ephemeral           bool
	// endWithJob: an ephemeral runner ends on its job's completed notice, without waiting for
	// its pod to exit (changeLeanLifecycle).
	endWithJob bool
	// poolWatches: the pool watches the registration deadline and its listing stands in for
	// the periodic pod read, so the runner sets neither deadline unless asked
	// (RunnerInput.PoolWatches).
	poolWatches bool
}

// action is what the runner's loop does next.
type action int

const (
	// actWait: nothing to do until a signal arrives or step.until passes.
	actWait action = iota
	// actEnd: the runner's work is over (step.end says why); unregister and delete.
	actEnd
	// actCheckRegistration: the registration timeout passed without the runner being seen online.
	actCheckRegistration
	// actCheckPod: no pod news for PodCheckInterval; read the pod (missed-signal backstop).
	actCheckPod
	// actConfirmGone: a listing no longer had the runner; ask GitHub by its id
	// (changeConfirmGone).
	actConfirmGone
	// actWriteCredential: the pod, created before its Secret, is scheduled: register (or copy
	// the warm registration) into its Secret now (changeSecretAfterScheduling).
	actWriteCredential
	// actRetireCredential: the runner's container started or its runner connected: its Secret
	// has served and is deleted (changeSecretAfterScheduling).
	actRetireCredential
)

// endKind says how a runner's watch ended.
type endKind int

const (
	// endFinish: unregister, delete, report done.
	endFinish endKind = iota
	// endReregister: the runner never came online; tear down and register again (or, since
	// changeNeverOnlineEnds, end as endNeverOnline).
	endReregister
	// endContinueAsNew: the history is long; carry on in a new run.
	endContinueAsNew
	// endCancelled: the workflow was cancelled; clean up and stop.
	endCancelled
	// endNeverOnline: the runner never came online; tear down and end, for the pool to decide
	// whether another runner is needed (changeNeverOnlineEnds).
	endNeverOnline
	// endClusterLost: the runner's cluster has not answered for ClusterLostAfter and the runner
	// never came online; leave the cluster, for the pool to place another runner on one that
	// answers (changeClusterLost).
	endClusterLost
	// endFailed: an activity of the watch failed for good (ending.failure); fail the runner.
	endFailed
)

// ending says why a runner's watch ended and what its cleanup needs.
type ending struct {
	kind   endKind
	reason string
	// githubDone: GitHub removed the registration itself (an ephemeral runner that exited after
	// its job, or a listing that no longer has it), so unregistering would only cost a call.
	githubDone bool
	// force: the operator force-removed the runner; it leaves pod first, even mid-job.
	force bool
	// failure is endFailed's cause.
	failure error
}

// step is the loop's next move.
type step struct {
	action action
	until  time.Time
	end    ending
}

// podRank orders pod phases so a late or duplicate signal never moves a pod backwards.
func podRank(p PodPhase) int {
	switch p {
	case PodPending:
		return 1
	case PodRunning:
		return 2
	case PodSucceeded, PodFailed:
		return 3
	case PodGone:
		return 4
	}
	return 0
}

// recordPod records a pod transition of the pod with uid. Signals about other pods (an earlier
// attempt's pod, reported late) are ignored; duplicates change nothing.
func (o *RunnerObservations) recordPod(s PodStatusSignal, uid string, now time.Time) {
	if uid == "" || (s.UID != "" && s.UID != uid) {
		return
	}
	o.LastPodCheck = now
	if s.Deleting {
		o.PodDeleting = true
	}
	if s.Scheduled {
		o.PodScheduled = true
	}
	if podRank(s.Phase) > podRank(o.PodPhase) {
		o.PodPhase = s.Phase
		if s.Reason != "" {
			o.PodReason = s.Reason
		}
	}
}

// recordRunnerStatus records a runner listing's view. A listing that does not have the runner
// is heeded only after the runner was seen online: a listing taken just before the
// registration would otherwise remove a runner that is about to start. With confirm
// (changeConfirmGone) one listing's silence is not believed at all: a listing read in pages
// skips a runner when GitHub removes others between two page reads, so the runner asks GitHub
// by its id (GoneAsk); a later listing that has it again withdraws the question.
func (o *RunnerObservations) recordRunnerStatus(s RunnerStatusSignal, now time.Time, confirm bool) {
	switch {
	case s.Gone:
		switch {
		case !o.Online:
		case confirm:
			if o.GoneAsk.IsZero() {
				o.GoneAsk = now
			}
		default:
			o.Gone = true
		}
	case s.Online:
		o.Online = true
		o.OfflineSince = time.Time{}
		o.GoneAsk = time.Time{}
		o.setBusy(s.Busy)
	default:
		o.GoneAsk = time.Time{}
		o.setBusy(s.Busy)
		// Offline after its job is how an ephemeral runner leaves; only otherwise is it stuck.
		if o.Online && o.OfflineSince.IsZero() && o.JobDoneAt.IsZero() {
			o.OfflineSince = now
		}
	}
}

func (o *RunnerObservations) setBusy(busy bool) {
	o.Busy = busy
	if !busy {
		o.JobID = 0
	}
}

// recordJobStarted records a workflow_job in_progress event naming this runner: it is online
// and busy. A job already seen completed (late or redelivered event) is ignored.
func (o *RunnerObservations) recordJobStarted(s JobSignal) {
	if s.JobID != 0 && slices.Contains(o.RecentJobs, s.JobID) {
		return
	}
	o.Online = true
	o.OfflineSince = time.Time{}
	o.Busy = true
	o.JobID = s.JobID
}

// recordJobCompleted records a workflow_job completed event naming this runner. Each job counts
// once; an ephemeral runner's pod is expected to exit soon after.
func (o *RunnerObservations) recordJobCompleted(s JobSignal, ephemeral bool, now time.Time) {
	if s.JobID != 0 {
		if slices.Contains(o.RecentJobs, s.JobID) {
			return
		}
		o.RecentJobs = append(o.RecentJobs, s.JobID)
		if len(o.RecentJobs) > RecentJobsKept {
			o.RecentJobs = slices.Clone(o.RecentJobs[len(o.RecentJobs)-RecentJobsKept:])
		}
	}
	o.JobsRun++
	o.Online = true
	if o.JobID == 0 || o.JobID == s.JobID {
		o.setBusy(false)
	}
	if ephemeral {
		o.JobDoneAt = now
	}
}

// recordDrain records a drain request; the first reason is kept.
func (o *RunnerObservations) recordDrain(d DrainRequest) {
	if o.Drain == nil {
		o.Drain = &d
	}
}

// recordForceRemove records a force-remove request; the first reason is kept.
func (o *RunnerObservations) recordForceRemove(f ForceRemoveRequest) {
	if o.Force == nil {
		o.Force = &f
	}
}

// forceEnding is the end of a force-removed runner, naming the operator's reason.
func (o *RunnerObservations) forceEnding() ending {
	return ending{reason: withDetail("force-removed", o.Force.Reason), force: true}
}

// ended reports whether the runner's work is over, and why. A force-remove comes first: the
// operator's word ends the runner whatever its pod or job is doing.
func (o *RunnerObservations) ended(lim watchLimits) (ending, bool) {
	switch {
	case o.Force != nil:
		return o.forceEnding(), true
	case o.PodPhase == PodSucceeded:
		return ending{reason: EndReasonPodSucceeded, githubDone: lim.ephemeral}, true
	case o.PodPhase == PodFailed:
		return ending{reason: withDetail("pod failed", o.PodReason)}, true
	case o.PodPhase == PodGone:
		return ending{reason: "pod gone"}, true
	case o.PodDeleting:
		return ending{reason: "pod is being deleted"}, true
	case o.Gone:
		return ending{reason: "runner no longer registered at GitHub", githubDone: true}, true
	case lim.endWithJob && !o.JobDoneAt.IsZero() && !o.Busy:
		// GitHub removes an ephemeral runner after its job; the pod is exiting by itself and
		// goes with the Secret.
		return ending{reason: EndReasonJobCompleted, githubDone: true}, true
	case o.Drain != nil && !o.Busy:
		return ending{reason: withDetail("drained", o.Drain.Reason)}, true
	}
	return ending{}, false
}

// next decides the loop's next move at time now. A busy runner never ends here except through
// its pod: drain waits for the job, and unregistering retries while GitHub says busy.
func (o *RunnerObservations) next(now time.Time, lim watchLimits) step {
	if end, ok := o.ended(lim); ok {
		return step{action: actEnd, end: end}
	}
	if act, ok := o.credentialDue(); ok {
		return step{action: act}
	}
	var until time.Time
	if !o.GoneAsk.IsZero() {
		if !now.Before(o.GoneAsk) {
			return step{action: actConfirmGone}
		}
		until = o.GoneAsk
	}
	if !o.Online && (!lim.poolWatches || o.CheckAsked || !o.RecheckAt.IsZero()) {
		deadline := o.AttemptStart.Add(lim.registrationTimeout)
		if o.RecheckAt.After(deadline) {
			deadline = o.RecheckAt
		}
		if !now.Before(deadline) {
			return step{action: actCheckRegistration}
		}
		until = earliest(until, deadline)
	}
	if !lim.poolWatches {
		podCheck := o.LastPodCheck.Add(PodCheckInterval)
		if !now.Before(podCheck) {
			return step{action: actCheckPod}
		}
		until = earliest(until, podCheck)
	}
	if !o.OfflineSince.IsZero() {
		deadline := o.OfflineSince.Add(StuckOfflineGrace)
		if !now.Before(deadline) {
			return step{action: actEnd, end: ending{reason: fmt.Sprintf("runner offline for %s while its pod runs", StuckOfflineGrace)}}
		}
		until = earliest(until, deadline)
	}
	if !o.JobDoneAt.IsZero() {
		deadline := o.JobDoneAt.Add(EphemeralExitGrace)
		if !now.Before(deadline) {
			return step{action: actEnd, end: ending{reason: "job completed; pod did not exit by itself", githubDone: true}}
		}
		until = earliest(until, deadline)
	}
	return step{action: actWait, until: until}
}

// credentialDue says what a pod created before its Secret (changeSecretAfterScheduling) needs
// now: its credential once it is scheduled — a kubelet that finds the Secret missing keeps the
// container waiting (CreateContainerConfigError) and tries again — and the Secret's deletion
// once the container started (its environment holds the credential; a pod that restarts no
// container needs it no more) or the runner connected, whichever is heard first.
func (o *RunnerObservations) credentialDue() (action, bool) {
	started := podRank(o.PodPhase) >= podRank(PodRunning)
	switch {
	case !o.PodUnreadSince.IsZero():
		// The cluster has not answered a pod read or a credential step since: a pod read that
		// succeeds (a registration check) comes first.
	case o.Credential == CredentialAwaitingNode && (o.PodScheduled || started):
		return actWriteCredential, true
	case o.Credential == CredentialInNamespace && (started || o.Online):
		return actRetireCredential, true
	}
	return actWait, false
}

// earliest returns the earlier of a (zero means unset) and b.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func withDetail(what, detail string) string {
	if detail == "" {
		return what
	}
	return what + ": " + detail
}

// EndReasonPodSucceeded is the reason of a runner that ended because its pod succeeded: its
// runner process exited after its work (an ephemeral runner's one job).
const EndReasonPodSucceeded = "pod succeeded"

// EndReasonJobCompleted is the reason of an ephemeral runner that ended because its job
// completed (GitHub removes such a runner after its job).
const EndReasonJobCompleted = "job completed"
