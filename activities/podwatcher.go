package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// The pod watcher is how runner workflows learn what their pods do without one long-running
// activity or one polling loop per runner: one shared informer on runnerflow's pods for the
// whole cluster, one signal per pod to the workflow named on the pod when the pod's run ends:
// its phase becomes Succeeded or Failed, its deletion starts, or it is gone — whichever comes
// first. Nothing before that (Pending, Running) changes what a runner workflow does, and
// nothing after it is news (the workflow ends its runner on the first), so those transitions
// cost no signal.
//
// A pod created before its runner's Secret (runnerpod.AnnotationSecretAfterScheduling) costs
// two signals more (SignalPodStart), because its workflow acts on them: when it is bound to a
// node (the Secret is written then) and when it runs (its container holds the credential: the
// Secret goes).
//
// One worker replica at a time runs it, elected through a Lease (ElectedPodWatcher): every
// replica running its own would make each pod's end one billable signal per replica. A
// watcher that starts (a new leader, a restart) lists every pod and signals those whose run
// has already ended; the workflow ignores transitions it already knows and pods that are not
// its current one, so that re-signalling is harmless. A pod deleted outright while no watcher
// ran is caught by the workflow's own pod-check timer.

// WorkflowSignaler is the part of the Temporal client the watcher uses.
type WorkflowSignaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

// PodWatcherConfig configures a PodWatcher.
type PodWatcherConfig struct {
	Client   kubernetes.Interface
	Temporal WorkflowSignaler
	// Namespace limits the watch to one namespace; empty watches all.
	Namespace string
	Logger    *slog.Logger
	// Workers is how many signals are sent at once besides the bindings; zero means
	// workflows.PodWatcherSignalsInFlight.
	Workers int
	// BindingWorkers is how many bindings (a pod created before its Secret, now bound: its
	// runner writes the credential next) are sent at once; zero means
	// workflows.PodWatcherBindingSignalsInFlight.
	BindingWorkers int
}

// PodWatcher signals runner workflows about their pods. Create it with NewPodWatcher.
type PodWatcher struct {
	cfg PodWatcherConfig
	log *slog.Logger
	// bindings holds the signals on a runner's way to its start (a pod created before its
	// Secret, bound), queue every other; each Run makes its own. Bindings have their own
	// workers, so a burst's ends and starts do not queue in front of them.
	bindings, queue workqueue.TypedRateLimitingInterface[podEvent]
}

// podEvent is one signal to send. Equal events waiting in the queue are sent once.
type podEvent struct {
	workflowID string
	// name is the signal's: SignalPodStatus for a run's end, SignalPodStart for a start's step.
	name   string
	signal workflows.PodStatusSignal
}

// maxSignalRetries bounds retries of one end signal (SignalPodStatus) when Temporal is
// unreachable (about five seconds of backoff); after that the workflow's own checks are the
// backstop. A start signal (SignalPodStart) is retried for as long as the watcher runs: its
// workflow waits for it to write the runner's credential, and no check of its own reads the
// pod before the registration timeout (minutes), so a start signal given up while Temporal
// restarts would hold the runner back, and its job, that long. A new watcher (leader) re-lists
// and sends it again (onAdd).
const maxSignalRetries = 10

// maxSignalRetryDelay caps the backoff between two tries of one signal, so a signal retried
// through a Temporal restart reaches its workflow within seconds of the server's return.
const maxSignalRetryDelay = 5 * time.Second

// newSignalQueue is the watcher's queue: per-signal exponential backoff from 5 ms, capped at
// maxDelay (maxSignalRetryDelay), and client-go's overall bucket (10 a second, bursts of 100).
func newSignalQueue(maxDelay time.Duration) workqueue.TypedRateLimitingInterface[podEvent] {
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[podEvent](5*time.Millisecond, maxDelay),
		&workqueue.TypedBucketRateLimiter[podEvent]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[podEvent]{Name: "runnerflow-pod-watcher"})
}

// NewPodWatcher checks cfg and returns a watcher; Run starts it.
func NewPodWatcher(cfg PodWatcherConfig) (*PodWatcher, error) {
	if cfg.Client == nil || cfg.Temporal == nil {
		return nil, errors.New("pod watcher needs a Kubernetes client and a Temporal client")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = workflows.PodWatcherSignalsInFlight
	}
	if cfg.BindingWorkers <= 0 {
		cfg.BindingWorkers = workflows.PodWatcherBindingSignalsInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &PodWatcher{cfg: cfg, log: cfg.Logger.With("component", "pod-watcher")}, nil
}

// Run watches until ctx ends. It returns an error only if the first listing never completes.
// It may run again after it returned (once per term of leadership), never twice at once: each
// run starts from a full listing and a new queue, and an ended pod whose signal an earlier
// run left unsent is found again by that listing.
func (w *PodWatcher) Run(ctx context.Context) error {
	w.queue, w.bindings = newSignalQueue(maxSignalRetryDelay), newSignalQueue(maxSignalRetryDelay)
	selector := runnerpod.LabelManagedBy + "=" + runnerpod.ManagedByValue
	factory := informers.NewSharedInformerFactoryWithOptions(w.cfg.Client, 0,
		informers.WithNamespace(w.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onAdd(obj) },
		UpdateFunc: func(old, obj any) { w.onUpdate(old, obj) },
		DeleteFunc: func(obj any) { w.onDelete(obj) },
	}); err != nil {
		return fmt.Errorf("pod watcher: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer w.queue.ShutDown()
	defer w.bindings.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("pod watcher: the first pod listing did not complete")
	}
	var wg sync.WaitGroup
	for q, workers := range map[workqueue.TypedRateLimitingInterface[podEvent]]int{w.queue: w.cfg.Workers, w.bindings: w.cfg.BindingWorkers} {
		for range workers {
			wg.Go(func() {
				for w.sendNext(ctx, q) {
				}
			})
		}
	}
	<-ctx.Done()
	w.queue.ShutDown()
	w.bindings.ShutDown()
	wg.Wait()
	return nil
}

// onAdd reports a pod seen for the first time (also every pod after a restart's re-list)
// whose run has already ended.
func (w *PodWatcher) onAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case runEnded(pod):
		w.enqueue(pod, workflows.SignalPodStatus, podSignal(pod))
	case startStep(pod) > 0:
		w.enqueue(pod, workflows.SignalPodStart, podSignal(pod))
	}
}

// onUpdate reports the transition into an ended run, once.
func (w *PodWatcher) onUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || runEnded(old) {
		return
	}
	switch {
	case runEnded(pod):
		w.enqueue(pod, workflows.SignalPodStatus, podSignal(pod))
	case startStep(pod) > startStep(old):
		w.enqueue(pod, workflows.SignalPodStart, podSignal(pod))
	}
}

// startStep is how far the start of a pod created before its Secret has come: 0 unscheduled
// (or not such a pod), 1 bound to a node, 2 running. Each step is one signal.
func startStep(pod *corev1.Pod) int {
	switch {
	case pod.Annotations[runnerpod.AnnotationSecretAfterScheduling] == "":
		return 0
	case pod.Status.Phase == corev1.PodRunning:
		return 2
	case pod.Spec.NodeName != "":
		return 1
	}
	return 0
}

// onDelete reports the pod gone, also when the informer only learned of it from a re-list,
// unless the pod's last known state had already been reported as ended.
func (w *PodWatcher) onDelete(obj any) {
	tomb, stale := obj.(cache.DeletedFinalStateUnknown)
	if stale {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || (!stale && runEnded(pod)) {
		return
	}
	sig := podSignal(pod)
	sig.Phase = workflows.PodGone
	w.enqueue(pod, workflows.SignalPodStatus, sig)
}

func (w *PodWatcher) enqueue(pod *corev1.Pod, name string, sig workflows.PodStatusSignal) {
	id := pod.Annotations[runnerpod.AnnotationWorkflowID]
	if id == "" {
		return // labelled as ours but not made by a runner workflow: nobody to tell
	}
	ev := podEvent{workflowID: id, name: name, signal: sig}
	if ev.isBinding() {
		w.bindings.Add(ev)
		return
	}
	w.queue.Add(ev)
}

// isBinding reports a pod created before its Secret that was bound to a node and has not
// started: its runner writes the credential on hearing it, and its container waits for that.
func (ev podEvent) isBinding() bool {
	return ev.name == workflows.SignalPodStart && ev.signal.Phase != workflows.PodRunning
}

// runEnded is true once the pod's run is over: it succeeded or failed, or its deletion began.
func runEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil
}

func podSignal(pod *corev1.Pod) workflows.PodStatusSignal {
	return workflows.PodStatusSignal{
		Pod: pod.Name, UID: string(pod.UID), Phase: workflows.PodPhase(pod.Status.Phase),
		Reason: pod.Status.Reason, Deleting: pod.DeletionTimestamp != nil, Scheduled: pod.Spec.NodeName != "",
	}
}

// sendNext sends one signal of q; false once q is shut down.
func (w *PodWatcher) sendNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[podEvent]) bool {
	ev, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(ev)
	err := w.cfg.Temporal.SignalWorkflow(ctx, ev.workflowID, "", ev.name, ev.signal)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil, errors.As(err, &notFound):
		// A closed workflow has nothing left to learn about its pod.
		q.Forget(ev)
	case ctx.Err() != nil:
		q.Forget(ev)
	case ev.name == workflows.SignalPodStart || q.NumRequeues(ev) < maxSignalRetries:
		w.log.Warn("Cannot signal runner workflow; retrying", "workflowID", ev.workflowID, "pod", ev.signal.Pod, "error", err)
		q.AddRateLimited(ev)
	default:
		w.log.Error("Giving up signalling runner workflow; its pod check will notice", "workflowID", ev.workflowID, "pod", ev.signal.Pod, "error", err)
		q.Forget(ev)
	}
	return true
}
