// Package workerapp assembles runnerflow's worker in-process: the Temporal client, the
// Kubernetes and GitHub clients, the activities, the pod watcher and two Temporal workers. The
// worker binary (worker/main.go) and the integration tests use it, so what is tested is what runs.
package workerapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/workflows"
)

// Config is what a worker needs. Zero values mean the documented defaults.
type Config struct {
	// TemporalAddress is the frontend's host:port; Namespace defaults to "default".
	TemporalAddress string
	Namespace       string
	// Client, when set, is used instead of dialling (and is not closed by the App); the
	// connection settings and TemporalMetrics are then the caller's business.
	Client client.Client
	// TemporalOptions are the rest of the connection settings (TLS, credentials such as a
	// Temporal Cloud API key, headers), as temporalconn reads them; the App sets the address,
	// namespace, identity, logger and metrics handler on a copy.
	TemporalOptions client.Options

	// Kube, when set, is the Kubernetes client configuration; otherwise KubeconfigPath is read,
	// and without either the in-cluster configuration is used. This is the default cluster,
	// where pools that name no cluster run; with Clusters set and neither of these, the worker
	// serves the named clusters only (servesDefaultCluster).
	Kube           *rest.Config
	KubeconfigPath string
	// Clusters are the named clusters this worker serves (clusters.go).
	Clusters []ClusterConfig
	// KubeQPS and KubeBurst, when positive, set the Kubernetes client's rate limit; zero keeps
	// the configuration's own, and where that is unset too (a kubeconfig or in-cluster
	// configuration never sets it) the policy's DefaultKubernetesQPS / DefaultKubernetesBurst.
	KubeQPS   float32
	KubeBurst int
	// WatchNamespace limits the pod watcher to one namespace; empty watches all.
	WatchNamespace string
	// PodWatcherLeaseNamespace and PodWatcherLeaseName name the Lease that elects the one
	// replica running the pod watcher. The namespace defaults to WatchNamespace, else the
	// Kubernetes configuration's (the kubeconfig context's, or in a cluster the worker's own);
	// the name to activities.DefaultPodWatcherLeaseName.
	PodWatcherLeaseNamespace string
	PodWatcherLeaseName      string
	// WarmNamespace is where warm registrations' Secrets are kept until a runner takes one: a
	// namespace no runner's pod may read Secrets in (docs/security.md). Empty: the Kubernetes
	// configuration's namespace (in a cluster the worker's own; the kubeconfig context's).
	WarmNamespace string

	// GitHub configures the GitHub client (token or App, API base URL).
	GitHub activities.GitHubConfig
	// GitHubPointsPerMinute is the credential's secondary rate limit, which the GitHub task
	// queue's rate limit is derived from; zero means GitHub's 900. (The hourly budget is read
	// from GitHub's answers: activities.GitHubBudget.)
	GitHubPointsPerMinute int

	// Reconcile, when set, is the reconcile Schedule this worker keeps (ReconcileConfig); nil
	// leaves the Schedule alone (the worker binary sets it unless --reconcile-interval=0).
	Reconcile *ReconcileConfig

	// Register, when set, adds more workflows and activities to the workflow worker
	// (TaskQueue), e.g. test doubles or features not yet assembled here.
	Register func(r worker.Registry, deps Deps)

	// Metrics is the process's one registry: the worker's own series (GitHub requests, rate
	// limit, Kubernetes errors) and, through TemporalMetrics, the SDK's and the workflows'
	// (pool gauges, scale-up latencies). Nil means no metrics.
	Metrics *prometheus.Registry
	// TemporalMetrics is the SDK metrics handler the dialled client reports through; nil with
	// Metrics set means one is made for Metrics. A process with several Temporal clients (the
	// demo) makes one with metrics.NewTemporalHandler and shares it.
	TemporalMetrics client.MetricsHandler
	// MetricsListen, when set, is the address Run serves /metrics, /healthz and /readyz on
	// (":0" picks a free port; MetricsAddr tells which).
	MetricsListen string
	// PprofListen, when set, is the address Run serves Go's runtime profiles on
	// (net/http/pprof's /debug/pprof/; ":0" picks a free port; PprofAddr tells which). Empty,
	// the default, serves none: a heap profile lays out what the process holds and a CPU
	// profile slows it while it runs, so only an operator (or the benchmark) asking gets them.
	PprofListen string

	// Deployment, when its BuildID is set, opts the workers into Temporal's Worker Versioning as
	// this Worker Deployment Version: runner workflows are pinned to the version that started
	// them, pools and scale windows move to the deployment's current version. Empty: unversioned.
	Deployment worker.WorkerDeploymentVersion

	// StickyWorkflowCacheSize bounds the workflows kept in memory between their tasks (the
	// SDK's sticky cache); zero means the policy's workflows.StickyWorkflowCacheSize. The SDK
	// keeps one cache per process, shared by all its workers and sized when the first of them
	// is created, so Apps that run at the same time in one process share the first one's size.
	StickyWorkflowCacheSize int

	// Identity names this worker in Temporal; empty means host and pid.
	Identity string
	// StopTimeout is how long a stopping worker lets running activities finish; zero means 10 s.
	StopTimeout time.Duration
	Logger      *slog.Logger
}

// DefaultDeploymentName is the Worker Deployment a versioned worker belongs to unless told.
const DefaultDeploymentName = "runnerflow"

// Deps are the clients a Register hook may build its activities from.
type Deps struct {
	Temporal   client.Client
	Kubernetes kubernetes.Interface
	GitHub     activities.GitHub
	Logger     *slog.Logger
}

// App is an assembled worker. Create it with New, run it with Run.
type App struct {
	cfg       Config
	log       *slog.Logger
	temporal  client.Client
	ownClient bool
	deps      Deps
	workers   []worker.Worker
	// watcher is the default cluster's pod watcher; nil when the worker does not serve it.
	watcher  *activities.ElectedPodWatcher
	clusters []clusterServer
	obs      observability
	// warmNS is the default cluster's warm namespace, as warmNamespace resolved it.
	warmNS string
	// warmSecrets caches the warm namespace's Secrets for warm starts; nil when not kept apart.
	warmSecrets *activities.WarmSecretCache
	// scaleSetSessions are the message sessions this worker holds; nil when it serves no sets.
	scaleSetSessions *activities.ScaleSetSessions
	// listenerWorker serves this worker's own listener queue, where its sessions' calls go.
	listenerWorker worker.Worker
}

// New dials Temporal and builds the clients, activities, pod watcher and workers. Nothing runs
// until Run.
func New(cfg Config) (_ *App, err error) {
	a := &App{cfg: withDefaults(cfg)}
	a.log = a.cfg.Logger
	a.obs.init(&a.cfg)
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	var kube kubernetes.Interface
	if servesDefaultCluster(a.cfg) {
		if kube, err = kubeClient(a.cfg, a.obs.activities); err != nil {
			return nil, err
		}
	}
	// The hour's budget is kept above the counting transport: a call refused at the reserve
	// never reaches GitHub, so it is not counted as a request.
	ghCfg := a.cfg.GitHub
	ghCfg.Transport = (&activities.GitHubBudget{}).Wrap(ghCfg.Transport)
	gh, err := activities.NewGitHubClient(ghCfg)
	if err != nil {
		return nil, err
	}
	if err := a.dial(); err != nil {
		return nil, err
	}
	a.deps = Deps{Temporal: a.temporal, Kubernetes: kube, GitHub: gh, Logger: a.log}
	if kube != nil {
		if err := a.buildPodWatcher(); err != nil {
			return nil, err
		}
	}
	if err := a.buildClusters(); err != nil {
		return nil, err
	}
	if err := a.obs.listen(a.cfg, a.Ready); err != nil {
		return nil, err
	}
	if err := a.obs.listenPprof(a.cfg); err != nil {
		return nil, err
	}
	if err := a.buildWorkers(); err != nil {
		return nil, err
	}
	return a, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	if cfg.StickyWorkflowCacheSize == 0 {
		cfg.StickyWorkflowCacheSize = workflows.StickyWorkflowCacheSize
	}
	if cfg.Deployment.BuildID != "" && cfg.Deployment.DeploymentName == "" {
		cfg.Deployment.DeploymentName = DefaultDeploymentName
	}
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		cfg.Identity = fmt.Sprintf("runnerflow-worker@%s/%d", host, os.Getpid())
	}
	return cfg
}

// kubeClient is the default cluster's client.
func kubeClient(cfg Config, m *activities.Metrics) (kubernetes.Interface, error) {
	restCfg, err := restConfig(cfg.Kube, cfg.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	var wrap func(http.RoundTripper) http.RoundTripper
	if m != nil {
		wrap = m.KubernetesTransport
	}
	return newKubeClient(cfg, restCfg, wrap)
}

// newKubeClient makes a client from a cluster's own configuration (a copy), at the worker's
// rate limit, its requests counted by wrap.
func newKubeClient(cfg Config, restCfg *rest.Config, wrap func(http.RoundTripper) http.RoundTripper) (kubernetes.Interface, error) {
	restCfg = rest.CopyConfig(restCfg)
	restCfg.QPS = firstPositive(cfg.KubeQPS, restCfg.QPS, workflows.DefaultKubernetesQPS)
	restCfg.Burst = int(firstPositive(float32(cfg.KubeBurst), float32(restCfg.Burst), workflows.DefaultKubernetesBurst))
	if wrap != nil {
		restCfg.Wrap(wrap)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

func (a *App) dial() error {
	if a.cfg.Client != nil {
		a.temporal = a.cfg.Client
		return nil
	}
	if a.cfg.TemporalAddress == "" {
		return errors.New("temporal address is required")
	}
	opts := a.cfg.TemporalOptions
	opts.HostPort, opts.Namespace, opts.Identity = a.cfg.TemporalAddress, a.cfg.Namespace, a.cfg.Identity
	opts.Logger, opts.MetricsHandler = tlog.NewStructuredLogger(a.log), a.cfg.TemporalMetrics
	c, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("dial temporal at %s: %w", a.cfg.TemporalAddress, err)
	}
	a.temporal, a.ownClient = c, true
	return nil
}

// buildWorkers creates the workers: DecisionTaskQueue runs the deciders (pools, windows,
// listeners, the reconcile, listings and pulls), TaskQueue the runners and the Kubernetes
// activities; GitHubTaskQueue runs only the GitHub activities, under a task-queue rate limit that
// the Temporal server enforces across all worker replicas (the GitHub budget, declared once);
// the named clusters' workers and the scale sets' (scalesets.go) follow.
func (a *App) buildWorkers() error {
	// Before the first worker.New, which creates the process's cache with the size set now.
	worker.SetStickyWorkflowCacheSize(a.cfg.StickyWorkflowCacheSize)
	// Pollers scale with the backlog (the SDK's poller autoscaling, driven by the server's
	// answers) instead of two of each: a burst puts hundreds of runners' workflow tasks and pod
	// activities on this queue at once, and two pollers took them a round trip at a time.
	// Both workflow queues register every workflow: a decider begun on TaskQueue before
	// DecisionTaskQueue existed runs there until it continues as new.
	decisions := worker.New(a.temporal, workflows.DecisionTaskQueue, worker.Options{
		Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DeploymentOptions: a.deploymentOptions(),
		MaxConcurrentWorkflowTaskExecutionSize: workflows.DecisionQueueWorker.WorkflowTaskSlots,
		WorkflowTaskPollerBehavior:             pollers(workflows.DecisionQueueWorker),
	})
	registerWorkflows(decisions, a.versioningBehaviors())
	reports := activities.NewRunnerReports(a.temporal)
	registerLocalActivities(decisions, reports)
	main := worker.New(a.temporal, workflows.TaskQueue, worker.Options{
		Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DeploymentOptions: a.deploymentOptions(),
		MaxConcurrentWorkflowTaskExecutionSize: workflows.RunnerQueueWorker.WorkflowTaskSlots,
		WorkflowTaskPollerBehavior:             pollers(workflows.RunnerQueueWorker),
		ActivityTaskPollerBehavior:             worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
	})
	registerWorkflows(main, a.versioningBehaviors())
	registerLocalActivities(main, reports)
	a.warmNS = a.warmNamespace()
	if a.deps.Kubernetes != nil { // the default cluster's Kubernetes activities
		if a.warmNS != a.cfg.WatchNamespace { // apart from the runners: warm starts copy, reading the cache
			a.warmSecrets = activities.NewWarmSecretCache(a.deps.Kubernetes, a.warmNS)
		}
		(&activities.KubernetesActivities{Client: a.deps.Kubernetes, Temporal: a.temporal, WarmSecrets: a.warmSecrets.Lister()}).Register(main)
		(&activities.SlotClaimActivities{Client: a.deps.Kubernetes}).Register(main)
	}
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).UpdatePoolReservations,
		activity.RegisterOptions{Name: workflows.ActivityUpdatePoolReservations})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).ListPoolOwnership,
		activity.RegisterOptions{Name: workflows.ActivityListPoolOwnership})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).FindEndedWorkflows,
		activity.RegisterOptions{Name: workflows.ActivityFindEndedWorkflows})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).StartRunnerWorkflows,
		activity.RegisterOptions{Name: workflows.ActivityStartRunnerWorkflows})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).DemandScopeListing,
		activity.RegisterOptions{Name: workflows.ActivityDemandScopeListing})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).DemandRepoPull,
		activity.RegisterOptions{Name: workflows.ActivityDemandRepoPull})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).ListEndedRunners,
		activity.RegisterOptions{Name: workflows.ActivityListEndedRunners})
	main.RegisterActivityWithOptions((&activities.TemporalActivities{Client: a.temporal}).SignalRunnerStatuses,
		activity.RegisterOptions{Name: workflows.ActivitySignalRunnerStatuses})
	if a.cfg.Register != nil {
		a.cfg.Register(main, a.deps)
	}
	gh := worker.New(a.temporal, workflows.GitHubTaskQueue, worker.Options{
		Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DisableWorkflowWorker: true,
		TaskQueueActivitiesPerSecond: workflows.GitHubActivitiesPerSecond(a.cfg.GitHubPointsPerMinute),
		DeploymentOptions:            a.deploymentOptions(),
	})
	(&activities.GitHubActivities{GitHub: a.deps.GitHub, Kube: a.deps.Kubernetes, WarmNamespace: a.warmNS}).Register(gh)
	if hooks, ok := a.deps.GitHub.(activities.HookDeliveries); ok { // the GitHubClient New built
		(&activities.HookActivities{Hooks: hooks}).Register(gh)
	}
	scaleSets, err := a.scaleSetWorkers()
	if err != nil {
		return err
	}
	a.workers = append(append([]worker.Worker{decisions, main, gh}, a.clusterWorkers()...), scaleSets...)
	return nil
}

// pollers is a queue's workflow-task pollers, scaled by the SDK with the backlog within the
// policy's bounds.
func pollers(q workflows.QueueWorker) worker.PollerBehavior {
	return worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: q.MinPollers, MinimumNumberOfPollers: q.MinPollers, MaximumNumberOfPollers: q.MaxPollers,
	})
}

// deploymentOptions opt both workers into Worker Versioning when a build id is configured. A
// workflow that names no behaviour (a Register hook's) moves with the current version.
func (a *App) deploymentOptions() worker.DeploymentOptions {
	if a.cfg.Deployment.BuildID == "" {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{
		UseVersioning: true, Version: a.cfg.Deployment,
		DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	}
}

// versioningBehaviors are the workflows' Worker Versioning behaviours: unspecified when the
// worker is unversioned. With versioning, a runner stays on the build that started it (its
// history is never replayed by another build), while pools and scale windows move to the
// current build (their changes are gated with workflow.GetVersion and replay-tested).
type versioningBehaviors struct {
	runner, pool workflow.VersioningBehavior
}

func (a *App) versioningBehaviors() versioningBehaviors {
	if a.cfg.Deployment.BuildID == "" {
		return versioningBehaviors{}
	}
	return versioningBehaviors{runner: workflow.VersioningBehaviorPinned, pool: workflow.VersioningBehaviorAutoUpgrade}
}

// registerLocalActivities registers the activities the workflows run as local activities: they
// run on the worker that runs the workflow, so every worker with workflows registers them, the
// same values (one group commit of runner reports per process).
func registerLocalActivities(w worker.ActivityRegistry, reports *activities.RunnerReports) {
	w.RegisterActivityWithOptions(reports.ReportRunnerState, activity.RegisterOptions{Name: workflows.ActivityReportRunnerState})
}

// registerWorkflows registers every workflow under its explicit type name, so renaming a Go
// function never breaks a running history.
func registerWorkflows(r worker.WorkflowRegistry, v versioningBehaviors) {
	for _, d := range workflows.Definitions {
		behavior := v.pool
		if d.LivesWithItsRunner {
			behavior = v.runner
		}
		r.RegisterWorkflowWithOptions(d.Fn, workflow.RegisterOptions{Name: d.Name, VersioningBehavior: behavior})
	}
}

// Run starts the workers, the pod watcher and the metrics listener and blocks until ctx ends
// or one of them fails; then it stops the workers, letting running activities finish for up
// to StopTimeout, and the listener last (/readyz says no from the start of the shutdown).
func (a *App) Run(ctx context.Context) error {
	defer a.close()
	for i, w := range a.workers {
		if err := w.Start(); err != nil {
			for _, started := range a.workers[:i] {
				started.Stop()
			}
			return fmt.Errorf("start worker: %w", err)
		}
	}
	a.obs.started.Store(true)
	a.ensureReconcileSchedule(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// One slot per goroutine that may fail, so none blocks on its send after Run stopped reading.
	errc := make(chan error, len(a.podWatchers())+len(a.obs.listeners()))
	for _, w := range a.podWatchers() {
		wg.Go(func() { errc <- w.Run(ctx) })
	}
	wg.Go(func() { a.warmSecrets.Run(ctx) })
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	for _, l := range a.obs.listeners() {
		wg.Go(func() {
			if err := l.server.Serve(serveCtx); err != nil {
				errc <- fmt.Errorf("%s server: %w", l.name, err)
			}
		})
	}
	a.log.Info("Worker running", "taskQueues", a.taskQueues(),
		"deploymentName", a.cfg.Deployment.DeploymentName, "buildID", a.cfg.Deployment.BuildID,
		"githubActivitiesPerSecond", workflows.GitHubActivitiesPerSecond(a.cfg.GitHubPointsPerMinute),
		"metricsAddr", a.MetricsAddr(), "pprofAddr", a.PprofAddr())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	a.obs.started.Store(false)
	cancel()
	a.stopWorkers()
	stopServing()
	wg.Wait()
	return err
}

// stopWorkers stops the workers in reverse order of their start, the scale-set queues first.
// The shared one stops first, so every session is opened on a worker that stays from then on.
// Then this worker leaves its sessions: its polls in flight end by closing their sessions,
// every other session closes at its listener's next call here, and the listener queue stays
// open until each listener has been told, so none waits out a schedule-to-start timeout
// (scalesets.go). The sessions left are closed once nothing here can use them.
func (a *App) stopWorkers() {
	for _, w := range slices.Backward(a.workers) {
		if w == a.listenerWorker {
			a.leaveScaleSetSessions()
		}
		w.Stop()
	}
	a.closeScaleSetSessions()
}

// Deps returns the clients the App built, for tests and Register hooks.
func (a *App) Deps() Deps { return a.deps }

func (a *App) close() {
	a.obs.close()
	if a.ownClient {
		a.temporal.Close()
		a.ownClient = false
	}
}

// buildPodWatcher makes the pod watcher that runs while this replica holds the Lease. The
// Lease gets a Kubernetes client of its own, with its own rate limiter: renewals never wait
// behind a burst of pod writes.
func (a *App) buildPodWatcher() error {
	leaseClient, err := kubeClient(a.cfg, a.obs.activities)
	if err != nil {
		return err
	}
	a.watcher, err = a.electedPodWatcher(a.deps.Kubernetes, leaseClient, "", a.cfg.KubeconfigPath)
	return err
}

// electedPodWatcher is one cluster's pod watcher ("" is the default cluster), elected by a
// Lease of the configured name in that cluster.
func (a *App) electedPodWatcher(kube, leaseClient kubernetes.Interface, cluster, kubeconfigPath string) (*activities.ElectedPodWatcher, error) {
	log := a.log
	if cluster != "" {
		log = log.With("cluster", cluster)
	}
	watcher, err := activities.NewPodWatcher(activities.PodWatcherConfig{
		Client: kube, Temporal: a.temporal, Namespace: a.cfg.WatchNamespace, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return activities.NewElectedPodWatcher(watcher, activities.PodWatcherLease{
		Client: leaseClient, Namespace: podWatcherLeaseNamespace(a.cfg, kubeconfigPath), Name: a.cfg.PodWatcherLeaseName,
		Leader: a.obs.activities.PodWatcherLeaderFor(cluster),
	})
}

// podWatcherLeaseNamespace is where the Lease lives: as configured, else the watched namespace
// (where the worker's namespaced Role is), else the Kubernetes configuration's namespace: the
// kubeconfig context's, or in a cluster the worker's own; "default" when none says.
func podWatcherLeaseNamespace(cfg Config, kubeconfigPath string) string {
	switch {
	case cfg.PodWatcherLeaseNamespace != "":
		return cfg.PodWatcherLeaseNamespace
	case cfg.WatchNamespace != "":
		return cfg.WatchNamespace
	}
	return configNamespace(kubeconfigPath)
}

// warmNamespace is where warm registrations' Secrets go: as configured, else the Kubernetes
// configuration's namespace (the worker's own in a cluster). When that is the namespace the
// worker watches runner pods in, warm registrations wait beside the runners and are used there
// in place: only a runner ServiceAccount without Secret rights keeps them from jobs, which the
// worker says once at start.
func (a *App) warmNamespace() string {
	ns := a.cfg.WarmNamespace
	if ns == "" {
		ns = configNamespace(a.cfg.KubeconfigPath)
	}
	if ns == a.cfg.WatchNamespace {
		a.log.Info("Warm registrations wait in the runner namespace: keep the runners' ServiceAccount without Secret rights there, or set --warm-namespace (docs/security.md)",
			"namespace", ns)
	}
	return ns
}

// configNamespace is the Kubernetes configuration's namespace: the kubeconfig context's, or in
// a cluster the worker's own; "default" when none says.
func configNamespace(kubeconfigPath string) string {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfigPath}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil || ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// firstPositive returns the first of values that is above zero (the last one otherwise).
func firstPositive(values ...float32) float32 {
	for _, v := range values {
		if v > 0 {
			return v
		}
	}
	return values[len(values)-1]
}
