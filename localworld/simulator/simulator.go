// Package simulator plays the kubelet and the GitHub Actions runner for the pods runnerflow
// creates (and those of actions-runner-controller, the benchmark's peer: see arcpod.go), so tests and demos run end to end against a real kube-apiserver (which has no
// kubelet and no container runtime here) and the GitHub double. It is test tooling: one
// goroutine per live pod, and no claim to scale.
//
// For every runner pod it binds the pod to a simulated node (after AnnotationUnscheduledFor,
// if set), reads the runner's credential from the pod's Secret as a kubelet does, from a watch
// of the Secrets (a missing Secret keeps the container waiting with CreateContainerConfigError
// until the watch shows it), sets it Running, brings the runner online at the double, takes
// jobs and completes them after a simulated work time. An ephemeral runner's pod Succeeds after
// its one job; a persistent runner waits for the next. Faults (never online, crash mid-job,
// eviction) are chosen per runner with SetFault or the pod annotation AnnotationFault.
package simulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

const (
	// AnnotationWorkDuration on a pod overrides Config.WorkDuration for its jobs (a Go
	// duration such as "500ms").
	AnnotationWorkDuration = "sim.runnerflow.dev/work-duration"
	// AnnotationFault on a pod arranges a Fault for its runner; SetFault takes precedence.
	AnnotationFault = "sim.runnerflow.dev/fault"
	// AnnotationUnscheduledFor on a pod keeps it unscheduled for that long after its creation
	// (a Go duration such as "60s"), as a scheduler does while no node has room (a quota, a
	// node scaling up): Pending, with no node and PodScheduled False (Unschedulable). Then it
	// is bound and runs as any other.
	AnnotationUnscheduledFor = "sim.runnerflow.dev/unscheduled-for"

	// DefaultNodeName is the simulated node when Config.NodeName is empty.
	DefaultNodeName     = "runnerflow-sim-node"
	defaultWorkDuration = 2 * time.Second
)

// Fault is a misbehaviour the simulator arranges for one runner.
type Fault string

const (
	// FaultNone: the runner behaves.
	FaultNone Fault = ""
	// FaultNeverOnline: the pod runs but the runner never connects to GitHub.
	FaultNeverOnline Fault = "never-online"
	// FaultCrashMidJob: the runner acquires a job and dies with it: it drops off GitHub (which
	// fails the job) and the pod Fails with exit code 1.
	FaultCrashMidJob Fault = "crash-mid-job"
	// FaultEvict: the kubelet evicts the pod as soon as its runner is online, before it takes
	// a job: the pod Fails with reason Evicted and the runner drops off GitHub.
	FaultEvict Fault = "evict"
	// FaultImagePull: the node cannot pull the runner's image: the pod is scheduled and stays
	// Pending, its runner container waiting with ImagePullBackOff, as a kubelet shows it.
	FaultImagePull Fault = "image-pull"
)

func (f Fault) valid() bool {
	switch f {
	case FaultNone, FaultNeverOnline, FaultCrashMidJob, FaultEvict, FaultImagePull:
		return true
	}
	return false
}

// Config configures a Simulator.
type Config struct {
	// Client reaches the API server; it needs pods (with binding and status), secrets and nodes.
	Client kubernetes.Interface
	// Namespaces to watch; empty means all.
	Namespaces []string
	// GitHub is the runner side of the GitHub double.
	GitHub *githubdouble.RunnerClient
	// WorkDuration is how long a job takes; zero means 2s. AnnotationWorkDuration overrides it
	// per pod.
	WorkDuration time.Duration
	// JobWork, when set, is how long one job takes, by its id at GitHub, where it answers
	// above zero (a benchmark's jobs of different lengths); the pod's length otherwise.
	JobWork func(jobID int64) time.Duration
	// NodeName is the simulated node pods are bound to; empty means "runnerflow-sim-node".
	NodeName string
	// Logger receives the simulator's logs; nil discards them.
	Logger *slog.Logger
	// ARCListener, when set, makes the simulator play the listener pods of ARC's scale-set
	// mode by running ARC's listener process (arclistener.go); nil leaves them alone.
	ARCListener *ARCListener
}

// Stats counts what the simulator did, for tests.
type Stats struct {
	PodsBound       int // pods bound to the node through pods/binding
	PodsStarted     int // pods set Running
	RunnersOnline   int // runners brought online at GitHub
	JobsStarted     int // jobs acquired
	JobsCompleted   int // jobs reported complete with success
	PodsSucceeded   int
	PodsFailed      int // pods set Failed: crashes, evictions, runners that could not start
	PodsEvicted     int // pods set Failed with reason Evicted (also counted in PodsFailed)
	DeletesFinished int // deletions finished with a grace-period-0 delete
}

// Simulator runs runner pods. Create it with New and start it with Run.
type Simulator struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	faults  map[string]Fault
	runners map[types.UID]*runner // by pod UID, until the pod leaves the informer
	stats   Stats
	started bool
	ctx     context.Context // Run's context; runners' lifetimes derive from it
	wg      sync.WaitGroup  // runner goroutines
	// secrets are the watched namespaces' Secrets, by namespace ("" when all are watched):
	// a kubelet's secret manager watches the Secrets its pods use, so waiting for one costs
	// the API server nothing. Set before the first runner starts.
	secrets map[string]corev1listers.SecretLister
}

// New returns a Simulator; it does nothing until Run.
func New(cfg Config) *Simulator {
	if cfg.WorkDuration <= 0 {
		cfg.WorkDuration = defaultWorkDuration
	}
	if cfg.NodeName == "" {
		cfg.NodeName = DefaultNodeName
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Simulator{cfg: cfg, log: log, faults: map[string]Fault{}, runners: map[types.UID]*runner{}}
}

// SetFault arranges a fault for the runner with that name (the pod's runnerflow.dev/runner
// label). It applies to the runner's next decision, so it may be set after the pod exists.
func (s *Simulator) SetFault(runnerName string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == FaultNone {
		delete(s.faults, runnerName)
		return
	}
	s.faults[runnerName] = f
}

// Stats returns a snapshot of the counters.
func (s *Simulator) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Simulator) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// Run ensures the node exists, then watches runner pods and plays them until ctx is done. On
// return every runner goroutine has ended and every runner it brought online is offline again
// (its process is gone with the simulator). A Simulator runs once.
func (s *Simulator) Run(ctx context.Context) error {
	if s.cfg.Client == nil || s.cfg.GitHub == nil {
		return errors.New("simulator: Config.Client and Config.GitHub are required")
	}
	// Cancelled on every way out, so informers started before a failure stop too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("simulator: Run called twice")
	}
	s.started, s.ctx = true, ctx
	s.mu.Unlock()

	if err := s.ensureNode(ctx); err != nil {
		return err
	}
	factories, err := s.startInformers(ctx)
	if err == nil {
		<-ctx.Done()
	}
	cancel()
	for _, f := range factories {
		f.Shutdown()
	}
	s.wg.Wait()
	return err
}

// startInformers starts pod informers per namespace (all namespaces when none are named),
// one for runnerflow's runner pods, one for each of ARC's modes' runner pods and, when the
// simulator plays them, one for ARC's listener pods, and waits for their caches.
func (s *Simulator) startInformers(ctx context.Context) ([]informers.SharedInformerFactory, error) {
	runnerflowPods, err := runnerPodSelector()
	if err != nil {
		return nil, err
	}
	arcPods, err := arcPodSelector()
	if err != nil {
		return nil, err
	}
	arcScaleSetPods, err := arcScaleSetPodSelector()
	if err != nil {
		return nil, err
	}
	selectors := []string{runnerflowPods, arcPods, arcScaleSetPods}
	if s.cfg.ARCListener != nil {
		listeners, err := arcListenerPodSelector()
		if err != nil {
			return nil, err
		}
		selectors = append(selectors, listeners)
	}
	namespaces := s.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{corev1.NamespaceAll}
	}
	factories, err := s.startSecretInformers(ctx, namespaces)
	if err != nil {
		return factories, err
	}
	for _, ns := range namespaces {
		for _, selector := range selectors {
			f, err := s.startInformer(ctx, ns, selector)
			if err != nil {
				return factories, err
			}
			factories = append(factories, f)
		}
	}
	for _, f := range factories {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok && ctx.Err() == nil {
				return factories, fmt.Errorf("simulator: cache of %v did not sync", typ)
			}
		}
	}
	return factories, nil
}

// startSecretInformers starts a Secret informer per namespace and waits for their caches, so
// that every runner finds its Secret in them (Simulator.secrets).
func (s *Simulator) startSecretInformers(ctx context.Context, namespaces []string) ([]informers.SharedInformerFactory, error) {
	var factories []informers.SharedInformerFactory
	listers := map[string]corev1listers.SecretLister{}
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(s.cfg.Client, 0, informers.WithNamespace(ns))
		secrets := f.Core().V1().Secrets()
		secrets.Informer() // registered before Start, so the factory runs it
		listers[ns] = secrets.Lister()
		f.Start(ctx.Done())
		factories = append(factories, f)
	}
	for _, f := range factories {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok && ctx.Err() == nil {
				return factories, fmt.Errorf("simulator: cache of %v did not sync", typ)
			}
		}
	}
	s.mu.Lock()
	s.secrets = listers
	s.mu.Unlock()
	return factories, nil
}

// secretLister is the watched Secrets of a namespace (nil when it is not watched).
func (s *Simulator) secretLister(namespace string) corev1listers.SecretLister {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.secrets[namespace]; ok {
		return l
	}
	return s.secrets[corev1.NamespaceAll]
}

// startInformer starts a pod informer for one namespace and label selector.
func (s *Simulator) startInformer(ctx context.Context, ns, selector string) (informers.SharedInformerFactory, error) {
	f := informers.NewSharedInformerFactoryWithOptions(s.cfg.Client, 0,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observeObj(obj) },
		UpdateFunc: func(_, obj any) { s.observeObj(obj) },
		DeleteFunc: s.forgetObj,
	}); err != nil {
		return nil, fmt.Errorf("simulator: pod informer: %w", err)
	}
	f.Start(ctx.Done())
	return f, nil
}

// runnerPodSelector selects pods runnerflow manages that carry a runner name.
func runnerPodSelector() (string, error) {
	managed, err := labels.NewRequirement(runnerpod.LabelManagedBy, selection.Equals, []string{runnerpod.ManagedByValue})
	if err != nil {
		return "", err
	}
	named, err := labels.NewRequirement(runnerpod.LabelRunner, selection.Exists, nil)
	if err != nil {
		return "", err
	}
	return labels.NewSelector().Add(*managed, *named).String(), nil
}

func (s *Simulator) observeObj(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		s.observe(pod)
	}
}

func (s *Simulator) forgetObj(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		s.forget(pod)
	}
}

// observe reacts to the informer's view of a pod: a live pod seen for the first time gets a
// runner goroutine; a deletion request reaches the runner, or is finished at once when no
// runner is running. The informer's object is shared and never modified here.
func (s *Simulator) observe(pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runners[pod.UID]
	if r == nil {
		r = newRunner(s, pod)
		s.runners[pod.UID] = r
		if pod.DeletionTimestamp == nil && !isTerminal(pod) {
			s.wg.Add(1)
			go r.run(pod.DeepCopy())
		} else {
			r.finished = true // nothing to run: a terminal pod, or one already being deleted
		}
	}
	if pod.DeletionTimestamp != nil && !r.deleting {
		r.deleting = true
		if r.finished {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.finishDelete(s.ctx, r.ref)
			}()
		} else {
			r.endWork()
		}
	}
}

// forget stops the runner of a pod that left the informer (deleted from the API server).
func (s *Simulator) forget(pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runners[pod.UID]; r != nil {
		r.endLife()
		delete(s.runners, pod.UID)
	}
}

// faultFor returns the fault arranged for a runner: SetFault first, then the pod annotation.
func (s *Simulator) faultFor(runnerName string, annotations map[string]string) Fault {
	s.mu.Lock()
	f, ok := s.faults[runnerName]
	s.mu.Unlock()
	if ok {
		return f
	}
	f = Fault(annotations[AnnotationFault])
	if !f.valid() {
		s.log.Warn("unknown fault annotation ignored", "runner", runnerName, "fault", string(f))
		return FaultNone
	}
	return f
}

// workDuration returns how long a job of this pod takes.
// unscheduledFor is how long the pod stays unscheduled after its creation
// (AnnotationUnscheduledFor); zero for none.
func (s *Simulator) unscheduledFor(runnerName string, annotations map[string]string) time.Duration {
	v, ok := annotations[AnnotationUnscheduledFor]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		s.log.Warn("invalid unscheduled-for annotation ignored", "runner", runnerName, "value", v)
		return 0
	}
	return d
}

// jobWork is how long one job takes: Config.JobWork's answer when above zero, else the pod's.
func (s *Simulator) jobWork(jobID int64, pods time.Duration) time.Duration {
	if s.cfg.JobWork != nil {
		if d := s.cfg.JobWork(jobID); d > 0 {
			return d
		}
	}
	return pods
}

func (s *Simulator) workDuration(runnerName string, annotations map[string]string) time.Duration {
	v, ok := annotations[AnnotationWorkDuration]
	if !ok {
		return s.cfg.WorkDuration
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		s.log.Warn("invalid work-duration annotation ignored", "runner", runnerName, "value", v)
		return s.cfg.WorkDuration
	}
	return d
}
