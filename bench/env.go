package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/kubewrites"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// webhookSecret signs the double's deliveries and the load generator's; the intake checks it.
const webhookSecret = "runnerflow benchmark webhook secret"

// env is the benchmark's world: the test world (real Temporal, real kube-apiserver, GitHub
// double with a webhook secret, runner simulator), the starter's intake on loopback fed by the
// double, and runnerflow's worker in-process with its Kubernetes writes counted.
type env struct {
	opts   Options
	world  *testworld.World
	c      client.Client
	intake *intake
	writes *kubewrites.Counter
	online *onlineTimes
	log    *slog.Logger
	// logFile holds log's lines and client-go's.
	logFile *os.File
	// progress receives one line per step, so a long run shows where it is.
	progress io.Writer

	stopWorker func() error
	// builtWorker is the worker binary built for this run (workerBinary), once.
	builtWorker string
	// offering holds the names (lower case) of the scale sets the double offers their jobs
	// to, as GitHub Enterprise Server does, rather than assigns them, as github.com does
	// (offerJobs).
	offering sync.Map
	// jobWork holds the simulator's run time of a job by its id (a func(int64) time.Duration):
	// the pipelines phase's drawn times while it runs, noJobWork otherwise.
	jobWork atomic.Value
}

// noJobWork leaves every job the simulator's run time.
func noJobWork(int64) time.Duration { return 0 }

func startEnv(ctx context.Context, opts Options, progress io.Writer) (_ *env, err error) {
	logFile, err := openLog(opts.LogPath)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
	quietKlog(logFile)
	e := &env{opts: opts, writes: kubewrites.NewCounter(), online: newOnlineTimes(logger.Handler()), log: logger,
		logFile: logFile, progress: progress}
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	e.jobWork.Store(noJobWork)
	e.say("warnings of the worker and the world go to %s", logFile.Name())
	e.world, err = testworld.StartWorld(ctx, testworld.WorldOptions{
		Logger: slog.New(e.online), WorkDuration: opts.JobDuration,
		GitHubRateLimit: opts.GitHubBudget, GitHubPointsPerMinute: opts.GitHubPointsPerMinute, WebhookSecret: webhookSecret,
		ScaleSetJobOffersFor: e.offersJobs,
		JobWork:              func(id int64) time.Duration { return e.jobWork.Load().(func(int64) time.Duration)(id) },
	})
	if err != nil {
		return nil, fmt.Errorf("start test world: %w", err)
	}
	if e.c, err = e.world.Temporal.Dial(); err != nil {
		return nil, err
	}
	e.intake, err = startIntake(webhook.Config{
		Secret: []byte(webhookSecret), Temporal: e.c, Logger: logger,
		Metrics: webhook.NewMetrics(prometheus.NewRegistry()),
	}, logger)
	if err != nil {
		return nil, err
	}
	e.world.GitHub.SetWebhookURL(e.intake.url)
	return e, e.startWorker()
}

// offerJobs makes the double offer its jobs to the scale set of that name (its pool's, unless
// the spec names it otherwise) once it is created; call it before the pool is applied: the
// double chooses a set's flow once, when the set is created.
func (e *env) offerJobs(set string) { e.offering.Store(strings.ToLower(set), true) }

// offersJobs is the double's Config.ScaleSetJobOffersFor: the sets offerJobs named.
func (e *env) offersJobs(set githubdouble.ScaleSetKey) bool {
	_, ok := e.offering.Load(strings.ToLower(set.Name))
	return ok
}

// startWorker runs runnerflow's worker in this process, as workerapp assembles it for the
// worker binary, with a transport wrapper counting its Kubernetes writes. Its Kubernetes client
// configuration is read from the world's kubeconfig file, as the binary's --kubeconfig is, so
// it has the binary's client settings (the policy's rate limit, not the world's test Config's).
func (e *env) startWorker() error {
	kube, err := clientcmd.BuildConfigFromFlags("", e.world.Kube.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("worker kubeconfig: %w", err)
	}
	app, err := workerapp.New(workerapp.Config{
		TemporalAddress: e.world.Temporal.Address, Namespace: e.world.Temporal.Namespace,
		Kube: e.writes.Wrap(kube), KubeQPS: float32(e.opts.KubeQPS), KubeBurst: e.opts.kubeBurst(),
		GitHub:                activities.GitHubConfig{BaseURL: e.world.GitHub.URL(), Token: e.world.GitHubToken},
		GitHubPointsPerMinute: e.opts.GitHubPointsPerMinute,
		Logger:                e.log,
	})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	e.stopWorker = func() error {
		cancel()
		return <-done
	}
	return nil
}

// stopInProcessWorker stops the in-process worker, so another worker (the memory figure's
// separate process) gets every task.
func (e *env) stopInProcessWorker() error {
	if e.stopWorker == nil {
		return nil
	}
	err := e.stopWorker()
	e.stopWorker = nil
	return err
}

func (e *env) stop() {
	if err := e.stopInProcessWorker(); err != nil {
		e.log.Warn("worker stopped with an error", "error", err)
	}
	if e.intake != nil {
		e.intake.close()
	}
	if e.c != nil {
		e.c.Close()
	}
	if e.world != nil {
		e.world.Stop()
	}
	if e.logFile != nil {
		klog.Flush()
		_ = e.logFile.Close()
	}
}

// quietKlog sends client-go's klog lines (throttling waits, failed reads) to the log file
// instead of stderr, errors included.
func quietKlog(w io.Writer) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(w)
}

// openLog creates the log file, or a new one in the temporary directory.
func openLog(path string) (*os.File, error) {
	if path == "" {
		return os.CreateTemp("", "runnerflow-bench-*.log")
	}
	return os.Create(path)
}

func (e *env) say(format string, args ...any) {
	fmt.Fprintf(e.progress, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// newNamespace creates a namespace for one phase's runners.
func (e *env) newNamespace(ctx context.Context, prefix string) (string, error) {
	ns, err := e.world.Kubernetes.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace: %w", err)
	}
	return ns.Name, nil
}

// poolSpec is a benchmark pool: organization scope, ephemeral runners, the simulator's
// runner image. A short scale-down delay lets a runner started for a job that another runner
// took leave soon, so a burst ends in seconds rather than after the 10-minute default.
func poolSpec(name, org, ns string, minR, maxR int) workflows.PoolSpec {
	return workflows.PoolSpec{
		Name: name, Organization: org, Labels: jobLabels, MinReplicas: minR, MaxReplicas: &maxR,
		Namespace: ns, ScaleDownDelay: &metav1.Duration{Duration: 15 * time.Second},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"},
		}}},
	}.WithDefaults()
}

// jobLabels are the runs-on of every benchmark job, and the labels of every benchmark pool.
var jobLabels = []string{"self-hosted", "linux"}

// applyAttempts bounds the retries of one pool's apply.
const applyAttempts = 5

// apply applies the specs one at a time, trying one again when it fails: apply is idempotent
// (update-with-start), and a worker busy bringing up a thousand runners can take longer than
// the apply's own call timeout to accept the update.
func (e *env) apply(ctx context.Context, specs ...workflows.PoolSpec) error {
	for _, spec := range specs {
		var err error
		for attempt := 1; attempt <= applyAttempts; attempt++ {
			if _, err = poolcli.Apply(ctx, e.c, []workflows.PoolSpec{spec}); err == nil || ctx.Err() != nil {
				break
			}
			e.log.Warn("apply failed; trying again", "pool", spec.Name, "attempt", attempt, "error", err)
			time.Sleep(2 * time.Second)
		}
		if err != nil {
			return fmt.Errorf("apply pools: %w", err)
		}
	}
	return nil
}

// status queries a pool's status, retrying while the query fails: the worker answers queries,
// and a worker busy with a burst lets one time out now and then.
func (e *env) status(ctx context.Context, pool string) (workflows.PoolStatus, error) {
	var st workflows.PoolStatus
	err := pollEvery(ctx, time.Second, "the status of pool "+pool, func() (bool, error) {
		var err error
		if st, err = poolcli.Status(ctx, e.c, pool); err != nil {
			e.log.Warn("pool status query failed; retrying", "pool", pool, "error", err)
		}
		return err == nil, nil
	})
	return st, err
}

// terminatePools ends a phase's pool workflows (their runners are gone by then), so they do
// not linger into the next phase.
func (e *env) terminatePools(ctx context.Context, pools ...string) {
	for _, p := range pools {
		if err := e.c.TerminateWorkflow(ctx, workflows.PoolWorkflowID(p), "", "benchmark phase over"); err != nil {
			e.log.Warn("terminate pool", "pool", p, "error", err)
		}
	}
}
