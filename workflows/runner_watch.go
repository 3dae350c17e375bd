package workflows

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"go.temporal.io/sdk/workflow"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// watch waits for the runner's work to end: signals are recorded into obs, RunnerObservations.next
// decides, and the loop carries out the decision (a GitHub check at the registration timeout, a
// pod read when the watcher has been silent too long, or the end).
func (r *runner) watch(ctx workflow.Context) ending {
	defer r.stopTimer()
	for {
		r.drainSignals()
		r.setState(ctx, r.derivedState(ctx), "")
		if ctx.Err() != nil {
			return ending{kind: endCancelled, reason: "cancelled"}
		}
		st := r.obs.next(workflow.Now(ctx), r.limits)
		switch st.action {
		case actEnd:
			return st.end
		case actCheckPod:
			r.checkPod(ctx)
		case actConfirmGone:
			r.confirmGone(ctx)
		case actWriteCredential, actRetireCredential:
			began, err := workflow.Now(ctx), r.credentialStep(ctx, st.action)
			r.stepWait = nil
			if err != nil {
				if end, over := r.credentialStepFailed(ctx, err, began); over {
					return end
				}
				r.stepWait = stepWaitOf(err, workflow.Now(ctx))
			}
		case actCheckRegistration:
			if end, over := r.checkRegistration(ctx); over {
				return end
			}
		default:
			if r.shouldContinueAsNew(ctx) {
				return ending{kind: endContinueAsNew}
			}
			r.waitUntil(ctx, st.until)
		}
	}
}

// derivedState is the state the observations imply while the runner is being watched. An
// ephemeral runner whose job is done is leaving (its pod exits by itself): it reports draining,
// not idle, so its pool counts it neither as free capacity nor as the job's runner.
func (r *runner) derivedState(ctx workflow.Context) RunnerState {
	switch {
	case r.obs.Drain != nil:
		return RunnerDraining
	case r.limits.ephemeral && !r.obs.JobDoneAt.IsZero() && !r.obs.Busy &&
		workflow.GetVersion(ctx, changeEphemeralDoneDrains, workflow.DefaultVersion, 1) >= 1:
		return RunnerDraining
	case !r.obs.Online:
		return RunnerRegistering
	case r.obs.Busy:
		return RunnerBusy
	}
	return RunnerIdle
}

// checkRegistration runs when the registration timeout passed without news of the runner being
// online. Nobody may have told us (no pool listing yet, a lost webhook), so it asks: the pod
// first (cheap; an exited pod means the work is over), then GitHub, and acts on what they say
// (decideRegistration). What cannot be read is asked again after RegistrationRecheckInterval;
// only a runner that never came online is torn down and registered again.
func (r *runner) checkRegistration(ctx workflow.Context) (ending, bool) {
	podRead := r.checkPod(ctx)
	if _, over := r.obs.ended(r.limits); over {
		return ending{}, false
	}
	if workflow.GetVersion(ctx, changeReadNotGuess, workflow.DefaultVersion, 1) < 1 {
		return r.checkRegistrationByGuess(ctx)
	}
	if _, due := r.obs.credentialDue(); due {
		return ending{}, false // the pod was scheduled or started: the loop acts on its credential first
	}
	// A cold runner's pod still waiting for a node has no registration yet
	// (changeSecretAfterScheduling): GitHub has nothing to say about it.
	var gh GetRunnerOutput
	var err error
	if r.obs.Credential != CredentialAwaitingNode || r.registered {
		gh, err = checkRunnerAtGitHub(ctx, r.runnerRef())
	}
	if err != nil {
		r.log.Warn("Cannot read runner status at registration timeout; asking again later", "error", err)
	}
	if err == nil && gh.Found && r.reg.RunnerID == 0 {
		r.reg.RunnerID = gh.RunnerID
	}
	now := workflow.Now(ctx)
	v := decideRegistration(r.podView(ctx, podRead, now), viewOfGitHub(gh, err))
	switch v.action {
	case verdictOnline:
		r.obs.Online = true
		r.obs.noteOnline(now, time.Time{})
		r.obs.setBusy(gh.Busy)
		return ending{}, false
	case verdictAskAgain:
		r.obs.RecheckAt = now.Add(RegistrationRecheckInterval)
		return ending{}, false
	case verdictWorkOver:
		return ending{reason: v.reason, githubDone: v.githubDone}, true
	case verdictClusterLost:
		return ending{kind: endClusterLost, reason: v.reason, githubDone: v.githubDone}, true
	}
	return ending{kind: endReregister, githubDone: v.githubDone,
		reason: v.reason + ", " + r.limits.registrationTimeout.String() + " after its pod was created"}, true
}

// confirmGone asks GitHub by id about a runner a listing no longer had (changeConfirmGone):
// one GET, and only its 404 ends the runner (as GitHub's removal of the registration). A runner
// GitHub still has keeps running with the status GitHub gives; an answer that did not come is
// asked again after RegistrationRecheckInterval, the runner carrying on meanwhile.
func (r *runner) confirmGone(ctx workflow.Context) {
	gh, err := checkRunnerAtGitHub(ctx, r.runnerRef())
	now := workflow.Now(ctx)
	switch {
	case err != nil:
		r.log.Warn("Cannot confirm that GitHub no longer has the runner; asking again later", "error", err)
		r.obs.GoneAsk = now.Add(RegistrationRecheckInterval)
	case !gh.Found:
		r.obs.GoneAsk, r.obs.Gone = time.Time{}, true
	default:
		if r.reg.RunnerID == 0 {
			r.reg.RunnerID = gh.RunnerID
		}
		r.obs.recordRunnerStatus(RunnerStatusSignal{Online: gh.Online, Busy: gh.Busy}, now, true)
	}
}

// checkRegistrationByGuess is the check of histories recorded before changeReadNotGuess: a
// runner not found online, or not read at all, was taken as never online.
func (r *runner) checkRegistrationByGuess(ctx workflow.Context) (ending, bool) {
	gh, err := getRunner(ctx, r.runnerRef())
	if err != nil {
		r.log.Warn("Cannot read runner status at registration timeout", "error", err)
	}
	if err == nil && gh.Found {
		if r.reg.RunnerID == 0 {
			r.reg.RunnerID = gh.RunnerID
		}
		if gh.Online {
			r.obs.Online = true
			r.obs.noteOnline(workflow.Now(ctx), time.Time{})
			r.obs.setBusy(gh.Busy)
			return ending{}, false
		}
	}
	return ending{kind: endReregister, reason: "runner not online " + r.limits.registrationTimeout.String() + " after its pod was created"}, true
}

// checkPod reads the pod: the backstop for a pod-watcher signal that never came. It reports
// whether the pod could be read.
func (r *runner) checkPod(ctx workflow.Context) bool {
	asked := workflow.Now(ctx)
	pod, err := getRunnerPod(ctx, r.podRef())
	now := workflow.Now(ctx)
	r.obs.LastPodCheck = now
	if err != nil {
		r.log.Warn("Cannot read runner pod; trying again later", "error", err)
		if r.obs.PodUnreadSince.IsZero() {
			r.obs.PodUnreadSince = asked // the cluster has not answered since this read began
		}
		return false
	}
	r.obs.PodUnreadSince = time.Time{}
	if !pod.Exists {
		pod.Phase = PodGone
	}
	r.obs.recordPod(PodStatusSignal{
		Pod: r.in.Name, UID: r.podUID, Phase: pod.Phase, Reason: pod.Reason, Deleting: pod.Deleting, Scheduled: pod.Scheduled,
	}, r.podUID, now)
	return true
}

// shouldContinueAsNew is true when the history is long enough to start a fresh run.
func (r *runner) shouldContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= RunnerHistoryLimit
}

// deadlineTimer is the one durable timer a waiting runner holds, for the earliest deadline. It
// is kept across signals, so a burst of signals does not start and cancel a timer each.
type deadlineTimer struct {
	at     time.Time
	future workflow.Future
	cancel workflow.CancelFunc
}

// waitUntil blocks until a signal, a drain update or the deadline, recording what arrived. A
// zero deadline (a runner its pool watches, with nothing due) waits for signals alone; a timer
// kept from before still fires, and the loop decides again.
func (r *runner) waitUntil(ctx workflow.Context, until time.Time) {
	if !until.IsZero() && (r.timer == nil || r.needsNewTimer(until)) {
		r.stopTimer()
		timerCtx, cancel := workflow.WithCancel(ctx)
		r.timer = &deadlineTimer{at: until, future: workflow.NewTimer(timerCtx, until.Sub(workflow.Now(ctx))), cancel: cancel}
	}
	sel := workflow.NewSelector(ctx)
	for _, src := range r.sources {
		src := src
		sel.AddReceive(src.ch, func(workflow.ReceiveChannel, bool) { src.take() })
	}
	sel.AddReceive(r.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
	if r.timer != nil {
		sel.AddFuture(r.timer.future, func(workflow.Future) { r.timer = nil })
	}
	sel.Select(ctx)
}

// needsNewTimer: before changeLeanLifecycle every new deadline replaced the timer; since, a
// timer that fires no later than the new deadline is kept (when it fires, the loop decides
// again and waits for what is left), so a deadline that moves later costs no timer.
func (r *runner) needsNewTimer(until time.Time) bool {
	if r.lean {
		return until.Before(r.timer.at)
	}
	return !r.timer.at.Equal(until)
}

func (r *runner) stopTimer() {
	if r.timer != nil {
		r.timer.cancel()
		r.timer = nil
	}
}

// signalSource is one signal channel and how to record what it carries.
type signalSource struct {
	ch workflow.ReceiveChannel
	// take receives one value without blocking and records it; false when the channel is empty.
	take func() bool
}

func source[T any](ch workflow.ReceiveChannel, record func(T)) signalSource {
	return signalSource{ch: ch, take: func() bool {
		var v T
		// ReceiveAsync skips a payload that does not decode (logged by the SDK), so a malformed
		// signal is dropped rather than failing the workflow.
		if !ch.ReceiveAsync(&v) {
			return false
		}
		record(v)
		return true
	}}
}

// signalSources lists the runner's signals in a fixed order (determinism) with their recorders.
func (r *runner) signalSources(ctx workflow.Context) []signalSource {
	now := func() time.Time { return workflow.Now(ctx) }
	return []signalSource{
		source(workflow.GetSignalChannel(ctx, SignalPodStatus), func(s PodStatusSignal) {
			r.obs.recordPod(s, r.podUID, now())
		}),
		source(workflow.GetSignalChannel(ctx, SignalRunnerStatus), func(s RunnerStatusSignal) {
			confirm := s.Gone && r.obs.Online &&
				workflow.GetVersion(ctx, changeConfirmGone, workflow.DefaultVersion, 1) >= 1
			r.obs.recordRunnerStatus(s, now(), confirm)
			r.obs.noteOnline(now(), time.Time{})
		}),
		source(workflow.GetSignalChannel(ctx, SignalJobStarted), func(s JobSignal) {
			if r.namesMe(s) {
				first := r.obs.isNewJob(s)
				r.obs.recordJobStarted(s)
				r.obs.noteOnline(now(), s.StartedAt)
				if first {
					r.recordScaleUpLatency(ctx, s)
				}
			}
		}),
		source(workflow.GetSignalChannel(ctx, SignalJobCompleted), func(s JobSignal) {
			if r.namesMe(s) {
				r.obs.recordJobCompleted(s, r.limits.ephemeral, now())
				r.obs.noteOnline(now(), time.Time{})
			}
		}),
		source(workflow.GetSignalChannel(ctx, SignalDrain), func(d DrainRequest) {
			r.obs.recordDrain(d)
		}),
		// A force-remove forwarded by the pool, which validated it (a signal has no validator):
		// an empty reason is still named, so the runner's end says who removed it.
		source(workflow.GetSignalChannel(ctx, SignalForceRemove), func(f ForceRemoveRequest) {
			if strings.TrimSpace(f.Reason) == "" {
				f.Reason = "no reason given"
			}
			r.obs.recordForceRemove(f)
		}),
		source(workflow.GetSignalChannel(ctx, SignalCheckRegistration), func(CheckRegistrationRequest) {
			r.obs.CheckAsked = true
		}),
		source(workflow.GetSignalChannel(ctx, SignalPodStart), func(s PodStatusSignal) {
			r.obs.recordPod(s, r.podUID, now())
		}),
	}
}

// namesMe guards against a job event misrouted to this runner.
func (r *runner) namesMe(s JobSignal) bool {
	if s.RunnerName != "" && s.RunnerName != r.in.Name {
		r.log.Warn("Ignoring job event for another runner", "jobID", s.JobID, "named", s.RunnerName)
		return false
	}
	return true
}

// drainSignals records every signal already delivered, without blocking.
func (r *runner) drainSignals() {
	for _, src := range r.sources {
		for src.take() {
		}
	}
}

func hasRunnerContainer(containers []corev1.Container) bool {
	for _, c := range containers {
		if c.Name == runnerpod.RunnerContainerName {
			return true
		}
	}
	return false
}
