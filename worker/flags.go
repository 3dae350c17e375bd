package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/temporalconn"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/workflows"
)

// options are the worker's command line. Credentials are read from the environment or from
// files, never taken as flag values (those show in the process list).
type options struct {
	temporal        temporalconn.Config
	kubeconfig      string
	clusters        clusterFlags
	kubeQPS         float64
	kubeBurst       int
	watchNamespace  string
	leaseNamespace  string
	leaseName       string
	warmNamespace   string
	githubURL       string
	appID           int64
	installationID  int64
	appKeyFile      string
	pointsPerMinute int
	metricsListen   string
	pprofListen     string
	stickyCacheSize int
	deploymentName  string
	buildID         string
	stopTimeout     time.Duration
	logLevel        string
	reconcile       time.Duration
	reconcileDryRun bool
	reconcileHook   string
}

// defineFlags defines every flag of the worker on fs.
func defineFlags(fs *flag.FlagSet) *options {
	o := &options{}
	o.temporal.RegisterFlags(fs)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file ($KUBECONFIG); empty means the in-cluster configuration")
	fs.Var(&o.clusters, "cluster", "a named cluster this worker serves, NAME=KUBECONFIG (NAME= in-cluster); repeat for several. Pools that list NAME place runners there; with --cluster, the default cluster is served only when --kubeconfig names it")
	fs.Float64Var(&o.kubeQPS, "kube-qps", 0, fmt.Sprintf("Kubernetes client requests per second (0: the policy default, %d)", workflows.DefaultKubernetesQPS))
	fs.IntVar(&o.kubeBurst, "kube-burst", 0, fmt.Sprintf("Kubernetes client burst (0: the policy default, %d)", workflows.DefaultKubernetesBurst))
	fs.StringVar(&o.watchNamespace, "watch-namespace", "", "namespace of the runner pods to watch; empty watches all (needs cluster-wide list/watch on pods)")
	fs.StringVar(&o.leaseNamespace, "pod-watcher-lease-namespace", "", "namespace of the Lease that elects the one replica watching pods; empty: --watch-namespace, else the worker's own")
	fs.StringVar(&o.leaseName, "pod-watcher-lease-name", activities.DefaultPodWatcherLeaseName, "name of the Lease that elects the one replica watching pods (replicas sharing it signal each pod's end once; two installations watching one namespace need two names)")
	fs.StringVar(&o.warmNamespace, "warm-namespace", "", "namespace where warm registrations' Secrets wait for their runners, one no runner's pod may read Secrets in (docs/security.md); empty: the worker's own (the kubeconfig context's outside a cluster)")
	fs.StringVar(&o.githubURL, "github-url", envOr("GITHUB_URL", "https://api.github.com/"), "GitHub REST API base URL; GitHub Enterprise Server: https://HOST/api/v3/ ($GITHUB_URL)")
	fs.Int64Var(&o.appID, "github-app-id", 0, "GitHub App id (with --github-installation-id and --github-app-key-file); without an App, $GITHUB_TOKEN is used")
	fs.Int64Var(&o.installationID, "github-installation-id", 0, "GitHub App installation id")
	fs.StringVar(&o.appKeyFile, "github-app-key-file", "", "GitHub App private key, PEM file")
	fs.IntVar(&o.pointsPerMinute, "github-points-per-minute", workflows.DefaultGitHubPointsPerMinute, "GitHub's secondary rate limit for the credential (points a minute; a write costs 5): the pace of GitHub calls across all worker replicas; the hourly budget is read from GitHub's answers")
	fs.StringVar(&o.metricsListen, "metrics-listen", ":9090", "address serving /metrics, /healthz and /readyz; empty turns it off")
	fs.StringVar(&o.pprofListen, "pprof-listen", "", "address serving Go's runtime profiles (/debug/pprof/: heap, goroutine, CPU) for diagnosing memory and CPU; empty, the default, serves none (keep it off the network: a heap profile shows what the process holds)")
	fs.IntVar(&o.stickyCacheSize, "sticky-workflow-cache-size", workflows.StickyWorkflowCacheSize, "workflows kept in memory between their tasks (Temporal's sticky cache; the least recently used go first and are replayed from history when next needed): memory against replay CPU, see docs/benchmarks.md, figure 5")
	fs.StringVar(&o.buildID, "build-id", os.Getenv("RUNNERFLOW_BUILD_ID"), "opts into Temporal Worker Versioning as this build of --deployment-name (runners stay on the build that started them, pools move to the current one; see docs/operations.md, Upgrades); empty: unversioned ($RUNNERFLOW_BUILD_ID)")
	fs.StringVar(&o.deploymentName, "deployment-name", workerapp.DefaultDeploymentName, "Temporal Worker Deployment the --build-id belongs to")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 30*time.Second, "on SIGTERM, how long running activities get to finish (keep below the pod's termination grace period)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.reconcile, "reconcile-interval", workflows.DefaultReconcileInterval, "how often the Temporal Schedule "+workflows.ReconcileScheduleID+" removes orphaned registrations, pods and Secrets and redelivers failed webhook deliveries; the worker creates or updates it at start-up (a paused one stays paused); 0 leaves the Schedule as it is")
	fs.BoolVar(&o.reconcileDryRun, "reconcile-dry-run", false, "scheduled reconciles report what they would remove or redeliver and do neither")
	fs.StringVar(&o.reconcileHook, "reconcile-hook", "", "the webhook whose failed workflow_job deliveries scheduled reconciles redeliver, each at most once: app (the GitHub App's webhook; the default with an App), org:<org>/<hook id>, repo:<owner>/<repo>/<hook id>, or none (the default with a token)")
	return o
}

// config turns the flags and the environment into the worker's configuration.
func (o *options) config(getenv func(string) string) (workerapp.Config, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return workerapp.Config{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	if o.kubeQPS < 0 || o.kubeBurst < 0 {
		return workerapp.Config{}, fmt.Errorf("--kube-qps and --kube-burst must not be negative, got %v and %d", o.kubeQPS, o.kubeBurst)
	}
	if o.stickyCacheSize < 2 {
		// The SDK's cache holds one workflow fewer than its size, so 1 would cache none.
		return workerapp.Config{}, fmt.Errorf("--sticky-workflow-cache-size must be at least 2, got %d", o.stickyCacheSize)
	}
	if o.pointsPerMinute <= 0 {
		return workerapp.Config{}, fmt.Errorf("--github-points-per-minute must be positive, got %d", o.pointsPerMinute)
	}
	if o.buildID != "" && (o.deploymentName == "" || strings.Contains(o.deploymentName, ".")) {
		return workerapp.Config{}, fmt.Errorf("--deployment-name %q: want a name without dots (Temporal writes a version as <name>.<build-id>)", o.deploymentName)
	}
	temporal, err := o.temporal.ClientOptions()
	if err != nil {
		return workerapp.Config{}, err
	}
	cfg := workerapp.Config{
		TemporalAddress: temporal.HostPort, Namespace: temporal.Namespace, TemporalOptions: temporal,
		KubeconfigPath: o.kubeconfig, Clusters: o.clusters, WatchNamespace: o.watchNamespace,
		PodWatcherLeaseNamespace: o.leaseNamespace, PodWatcherLeaseName: o.leaseName, WarmNamespace: o.warmNamespace,
		KubeQPS: float32(o.kubeQPS), KubeBurst: o.kubeBurst,
		GitHubPointsPerMinute:   o.pointsPerMinute,
		MetricsListen:           o.metricsListen,
		PprofListen:             o.pprofListen,
		StickyWorkflowCacheSize: o.stickyCacheSize,
		Deployment:              worker.WorkerDeploymentVersion{DeploymentName: o.deploymentName, BuildID: o.buildID},
		StopTimeout:             o.stopTimeout,
		Logger:                  slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if o.reconcile < 0 {
		return workerapp.Config{}, fmt.Errorf("--reconcile-interval must not be negative, got %s", o.reconcile)
	}
	cfg.GitHub.BaseURL = o.githubURL
	app := o.appID != 0 || o.installationID != 0 || o.appKeyFile != ""
	if app {
		cfg.GitHub.AppID, cfg.GitHub.InstallationID, cfg.GitHub.PrivateKeyPath = o.appID, o.installationID, o.appKeyFile
	} else {
		cfg.GitHub.Token = strings.TrimSpace(getenv("GITHUB_TOKEN"))
	}
	hook, err := o.redeliveryHook(app)
	if err != nil {
		return workerapp.Config{}, err
	}
	if o.reconcile > 0 {
		cfg.Reconcile = &workerapp.ReconcileConfig{Interval: o.reconcile, DryRun: o.reconcileDryRun, Hook: hook}
	}
	return cfg, nil
}

// redeliveryHook is the hook --reconcile-hook names; unset, the App's own webhook when the
// worker is a GitHub App (where GitHub sends the App's events), else none: a token's webhook
// is an organization's or repository's, whose id only the operator knows.
func (o *options) redeliveryHook(app bool) (workflows.HookRef, error) {
	if o.reconcileHook == "" && app {
		return workflows.HookRef{App: true}, nil
	}
	hook, err := workflows.ParseHookRef(o.reconcileHook)
	if err != nil {
		return workflows.HookRef{}, fmt.Errorf("--reconcile-hook: %w", err)
	}
	if hook.App && !app {
		return workflows.HookRef{}, fmt.Errorf("--reconcile-hook=app needs a GitHub App (--github-app-id); with a token name an org:<org>/<hook id> or repo:<owner>/<repo>/<hook id> hook")
	}
	return hook, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
