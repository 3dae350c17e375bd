package simulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

const (
	// acquireWait is the long poll for a job. Short, so a runner notices quickly when its
	// pod is being deleted even if the double does not end the poll.
	acquireWait = time.Second
	// retryDelay spaces retries of calls that failed for a transient reason (the API server
	// or the double not answering), as the kubelet and the runner retry.
	retryDelay = 500 * time.Millisecond
	// disconnectTimeout bounds going offline on the way out, when the double may be gone.
	disconnectTimeout = 5 * time.Second
	// credentialPoll is how often a runner waiting for its Secret looks again, in the
	// simulator's watch of the Secrets (no API call).
	credentialPoll = 100 * time.Millisecond
	// connectTimeout bounds one attempt to come online, which runs to its end even when the
	// pod's work ends meanwhile (see connectOnce).
	connectTimeout = 10 * time.Second
)

// podRef names one incarnation of a pod: a pod recreated under the same name is another pod,
// and every write carries the UID so it cannot reach the newcomer.
type podRef struct {
	Namespace, Name string
	UID             types.UID
}

func (p podRef) String() string { return p.Namespace + "/" + p.Name }

// runner is the simulated container of one pod: the actions runner inside it.
type runner struct {
	s    *Simulator
	ref  podRef
	name string // runner name: the runnerflow.dev/runner label (an ARC pod's name)
	log  *slog.Logger

	// life ends when the pod leaves the informer or the simulator stops; work also ends when
	// the pod's deletion is requested.
	life    context.Context
	endLife context.CancelFunc
	work    context.Context
	endWork context.CancelFunc

	// Guarded by s.mu.
	finished bool // the goroutine is done, or there was nothing to run
	deleting bool // the pod's deletion has been requested

	// Owned by the runner goroutine: the session while the runner is online at GitHub.
	session *githubdouble.RunnerSession
}

// newRunner prepares the runner of a pod. Callers hold s.mu.
func newRunner(s *Simulator, pod *corev1.Pod) *runner {
	life, endLife := context.WithCancel(s.ctx)
	work, endWork := context.WithCancel(life)
	ref := podRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	name := runnerNameOf(pod)
	return &runner{
		s: s, ref: ref, name: name, log: s.log.With("runner", name, "pod", ref.String()),
		life: life, endLife: endLife, work: work, endWork: endWork,
	}
}

// run plays the pod from binding to its end, then takes the runner offline and, if the pod is
// being deleted, finishes the deletion as the kubelet does once the container has stopped.
func (r *runner) run(pod *corev1.Pod) {
	defer r.s.wg.Done()
	lifecycle := r.lifecycle
	if isARCListenerPod(pod) {
		lifecycle = r.listenerLifecycle
	}
	if end := lifecycle(pod); end != nil && r.work.Err() == nil {
		// The kubelet keeps trying until the API server takes the final status (an outage, a
		// throttled or overloaded server): a pod never left Running because one write failed.
		r.retry("setting the pod's final status", func() error { return r.s.terminate(r.life, r.ref, *end) })
	}
	r.goOffline()
	r.s.mu.Lock()
	r.finished = true
	deleting := r.deleting
	r.s.mu.Unlock()
	if deleting {
		// Not r.life: the informer sees the pod go while the delete call is still reading its
		// answer, and ending r.life then would cancel the call that succeeded.
		r.s.finishDelete(r.s.ctx, r.ref)
	}
}

// lifecycle runs the pod until it ends. It returns how the pod ends, or nil when it was
// interrupted (deletion, the pod vanished, the simulator stopped) or should stay as it is.
func (r *runner) lifecycle(pod *corev1.Pod) *termination {
	if !r.holdUnscheduled(pod) {
		return nil
	}
	if !r.retry("binding the pod", func() error { return r.s.bind(r.work, r.ref, pod.Spec.NodeName) }) {
		return nil
	}
	if r.fault(pod) == FaultImagePull {
		r.log.Info("fault: the image cannot be pulled")
		msg := fmt.Sprintf("Back-off pulling image %q", runnerImage(pod))
		if !r.retry("showing the image pull failing", func() error { return r.s.markWaiting(r.work, r.ref, "ImagePullBackOff", msg) }) {
			return nil
		}
		<-r.work.Done()
		return nil
	}
	spec, err := parseRunnerSpec(pod)
	if err != nil {
		// The runner process would exit at once with a configuration error.
		return &termination{phase: corev1.PodFailed, exitCode: 1, message: err.Error()}
	}
	cred, ok := r.waitForCredential(spec.credential)
	if !ok {
		return nil
	}
	if !r.retry("setting the pod Running", func() error { return r.s.markRunning(r.work, r.ref) }) {
		return nil
	}
	if r.fault(pod) == FaultNeverOnline {
		r.log.Info("fault: runner stays offline")
		<-r.work.Done()
		return nil
	}
	if err := r.connect(spec, cred); err != nil {
		if r.work.Err() != nil {
			return nil
		}
		r.log.Warn("runner could not come online", "error", err)
		return &termination{phase: corev1.PodFailed, exitCode: 1, message: "runner could not connect to GitHub: " + protocolStatus(err)}
	}
	if r.fault(pod) == FaultEvict {
		r.log.Info("fault: evicting the pod")
		return evicted()
	}
	return r.serveJobs(r.s.workDuration(r.name, pod.Annotations), pod)
}

// holdUnscheduled keeps a pod that is not bound yet unscheduled until AnnotationUnscheduledFor
// has passed since its creation, shown as the scheduler shows a pod no node has room for. It
// reports whether the pod's work goes on.
func (r *runner) holdUnscheduled(pod *corev1.Pod) bool {
	hold := r.s.unscheduledFor(r.name, pod.Annotations)
	if hold == 0 || pod.Spec.NodeName != "" {
		return true
	}
	left := time.Until(pod.CreationTimestamp.Add(hold))
	if left <= 0 {
		return true
	}
	r.log.Info("holding the pod unscheduled", "for", left)
	if !r.retry("showing the pod unschedulable", func() error { return r.s.markUnschedulable(r.work, r.ref) }) {
		return false
	}
	return r.pause(left)
}

// waitForCredential reads the runner's credential from its Secret. While the Secret or key is
// missing the kubelet keeps the container waiting with CreateContainerConfigError and retries.
func (r *runner) waitForCredential(c credentialSource) (string, bool) {
	shown := ""
	for {
		cred, err := r.s.readCredential(r.work, r.ref.Namespace, c)
		if err == nil {
			return cred, true
		}
		if r.work.Err() != nil {
			return "", false
		}
		if err.Error() != shown { // the pod's status changes only when the reason does
			r.log.Warn("runner credential not available yet", "error", err)
			if merr := r.s.markWaiting(r.work, r.ref, "CreateContainerConfigError", err.Error()); merr != nil {
				r.logUnlessStopped("could not set the container waiting", merr)
			} else {
				shown = err.Error()
			}
		}
		if !r.pause(credentialPoll) {
			return "", false
		}
	}
}

// connect brings the runner online, retrying while the double cannot be reached. An answer
// from the double (an unknown config, a name or session conflict) is final: the real runner
// would exit on it.
func (r *runner) connect(spec runnerSpec, cred string) error {
	for {
		sess, err := r.connectOnce(spec, cred)
		if err == nil {
			r.session = &sess
			r.s.count(func(st *Stats) { st.RunnersOnline++ })
			r.log.Info("runner online", "ephemeral", sess.Ephemeral)
			return nil
		}
		var perr *githubdouble.ProtocolError
		if errors.As(err, &perr) || r.work.Err() != nil {
			return err
		}
		r.log.Warn("GitHub not reachable, retrying", "error", err)
		if !r.pause(retryDelay) {
			return r.work.Err()
		}
	}
}

// connectOnce makes one attempt to come online. An attempt begun runs to its end, even when the
// pod's work ends meanwhile (the simulator stopping, the pod deleted): cancelled halfway, the
// double could count the runner online while the runner never learnt its session, and no one
// would take it offline again. With the session known, the way out disconnects it.
func (r *runner) connectOnce(spec runnerSpec, cred string) (githubdouble.RunnerSession, error) {
	if err := r.work.Err(); err != nil {
		return githubdouble.RunnerSession{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.work), connectTimeout)
	defer cancel()
	gh := r.s.cfg.GitHub
	if spec.mode == modeJIT {
		return gh.ConnectJIT(ctx, cred)
	}
	sess, err := gh.RegisterWithToken(ctx, githubdouble.RegisterRequest{
		Token: cred, Name: spec.name, Labels: spec.labels, RunnerGroup: spec.group, Ephemeral: spec.ephemeral,
	})
	if err != nil {
		return sess, err
	}
	return sess, gh.Connect(ctx, sess)
}

// serveJobs takes jobs until the runner is done: after one job when ephemeral, otherwise until
// the pod is deleted or GitHub removes the runner.
func (r *runner) serveJobs(work time.Duration, pod *corev1.Pod) *termination {
	gh := r.s.cfg.GitHub
	for {
		job, err := gh.AcquireJob(r.work, *r.session, acquireWait)
		switch {
		case r.work.Err() != nil:
			return nil
		case errors.Is(err, githubdouble.ErrUnauthorized), errors.Is(err, githubdouble.ErrConflict):
			// The registration was removed (or the session taken away): the runner exits.
			r.log.Info("runner removed at GitHub; exiting", "error", err)
			r.session = nil
			return &termination{phase: corev1.PodFailed, exitCode: 1, message: "runner was removed from GitHub"}
		case err != nil:
			r.log.Warn("could not acquire a job, retrying", "error", err)
			if !r.pause(retryDelay) {
				return nil
			}
			continue
		case job == nil:
			continue
		}
		r.s.count(func(st *Stats) { st.JobsStarted++ })
		log := r.log.With("jobID", job.ID)
		log.Info("job acquired", "repository", job.Repository)
		if r.fault(pod) == FaultCrashMidJob {
			log.Info("fault: runner crashes mid-job")
			r.goOffline()
			return &termination{phase: corev1.PodFailed, exitCode: 1, message: "runner crashed while running a job"}
		}
		if !r.pause(r.s.jobWork(job.ID, work)) {
			return nil
		}
		if done, end := r.completeJob(log, job.ID); done {
			return end
		}
	}
}

// completeJob reports the job done. It returns true with the pod's end when the runner
// exits afterwards (an ephemeral runner is removed by GitHub after its job).
func (r *runner) completeJob(log *slog.Logger, jobID int64) (bool, *termination) {
	for {
		err := r.s.cfg.GitHub.CompleteJob(r.work, *r.session, jobID, githubdouble.ConclusionSuccess)
		if r.work.Err() != nil {
			return true, nil
		}
		var perr *githubdouble.ProtocolError
		switch {
		case err == nil:
			r.s.count(func(st *Stats) { st.JobsCompleted++ })
			log.Info("job completed")
		case errors.As(err, &perr):
			// GitHub ended the job first (cancelled): the runner moves on as the real one does.
			log.Info("job was ended at GitHub", "error", err)
		default:
			log.Warn("could not complete the job, retrying", "error", err)
			if !r.pause(retryDelay) {
				return true, nil
			}
			continue
		}
		if !r.session.Ephemeral {
			return false, nil
		}
		r.session = nil // GitHub removed the ephemeral runner with its job
		return true, &termination{phase: corev1.PodSucceeded}
	}
}

// goOffline disconnects the runner if it is online, as GitHub notices a runner whose process
// ended. It runs on the way out, so it does not use the (possibly ended) pod contexts.
func (r *runner) goOffline() {
	if r.session == nil {
		return
	}
	sess := *r.session
	r.session = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.life), disconnectTimeout)
	defer cancel()
	err := r.s.cfg.GitHub.Disconnect(ctx, sess)
	switch {
	case err == nil:
		r.log.Info("runner offline")
	case errors.Is(err, githubdouble.ErrUnauthorized):
		// Already removed at GitHub: nothing is online.
	default:
		r.log.Warn("could not take the runner offline", "error", err)
	}
}

func (r *runner) fault(pod *corev1.Pod) Fault { return r.s.faultFor(r.name, pod.Annotations) }

// pause waits d unless the pod's work ends first; it reports whether the full time passed.
func (r *runner) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.work.Done():
		return false
	}
}

// retry calls f until it succeeds, as the kubelet retries its API writes. It gives up when
// the pod's work ends or the pod is gone (deleted, or replaced by a namesake).
func (r *runner) retry(what string, f func() error) bool {
	for {
		err := f()
		switch {
		case err == nil:
			return true
		case r.work.Err() != nil:
			return false
		case errors.Is(err, errPodReplaced), apierrors.IsNotFound(err):
			r.log.Info(what+": the pod is gone", "error", err)
			return false
		}
		r.log.Warn(what+" failed, retrying", "error", err)
		if !r.pause(retryDelay) {
			return false
		}
	}
}

// logUnlessStopped logs err unless the work ended (then the failure is the interruption).
func (r *runner) logUnlessStopped(msg string, err error) {
	if r.work.Err() == nil {
		r.log.Error(msg, "error", err)
	}
}

// protocolStatus describes a connect failure without the double's message text, which could
// in principle quote what the runner sent (its credential).
func protocolStatus(err error) string {
	var perr *githubdouble.ProtocolError
	if errors.As(err, &perr) {
		return fmt.Sprintf("HTTP %d", perr.StatusCode)
	}
	return "not reachable"
}

// runnerImage is the image of the pod's runner container.
func runnerImage(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == runnerpod.RunnerContainerName {
			return c.Image
		}
	}
	return ""
}
