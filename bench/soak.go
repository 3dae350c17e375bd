package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	// soakOrg is the organization of the soak's pools: one organization, so the reconcile
	// Schedule's one hook (the organization's) carries every failed delivery of the soak.
	soakOrg = "org-soak"
	// soakHookID is the GitHub double's webhook, which it serves as each organization's hook.
	soakHookID = 1
	// soakPools is how many pools the soak's jobs are spread over, soakPoolMax each one's
	// bound (far above what a steady rate needs, so a backlog after an outage is not capped).
	soakPools   = 2
	soakPoolMax = 200
	// soakScaleSetPool and soakOfferingPool are the soak's scale-set pools, beside the webhook
	// pools: each told of its jobs by its set's listener, whose session lives in the worker
	// process the plan kills. The service assigns soak-s its jobs (github.com) and offers
	// soak-o its jobs, to be acquired (GitHub Enterprise Server).
	soakScaleSetPool = "soak-s"
	soakOfferingPool = "soak-o"
	// soakRestCheck is how often the convergence wait looks at the world.
	soakRestCheck = 5 * time.Second
	// workerStartBound bounds a worker process's start until it polls Temporal.
	workerStartBound = 2 * time.Minute
)

// soakScaleSetPools are the soak's scale-set pools, in the order of soakPhase.setIDs.
var soakScaleSetPools = []string{soakScaleSetPool, soakOfferingPool}

// SoakOptions are the soak phase's settings (--soak and the --soak-* flags).
type SoakOptions struct {
	// Run turns the phase on.
	Run bool
	// Jobs are queued at a steady rate over Duration, each running JobDuration.
	Jobs        int
	Duration    time.Duration
	JobDuration time.Duration
	// Seed draws the faults; 0 draws a seed from the clock (printed, to repeat the run).
	Seed int64
	// Reconcile is the worker's --reconcile-interval: the Schedule that removes orphans and
	// redelivers the deliveries that failed while Temporal was down.
	Reconcile time.Duration
	// Settle bounds the wait for convergence after the last fault.
	Settle time.Duration
}

// soakFlags registers the soak's flags.
func soakFlags(fs *flag.FlagSet, o *SoakOptions) {
	fs.BoolVar(&o.Run, "soak", false, "also run the soak phase: jobs at a steady rate into webhook and scale-set pools while workers are killed and deployed, Temporal restarted, the API server paused, GitHub and its Actions service answer 5xx, the sets' sessions expire and their jobs are reassigned")
	fs.IntVar(&o.Jobs, "soak-jobs", 1000, "jobs the soak queues")
	fs.DurationVar(&o.Duration, "soak-duration", 10*time.Minute, "how long the soak queues its jobs (and injects faults)")
	fs.DurationVar(&o.JobDuration, "soak-job-duration", 20*time.Second, "how long a soak job runs")
	fs.Int64Var(&o.Seed, "soak-seed", 0, "seed of the soak's fault plan (0: from the clock; the run prints the seed it used)")
	fs.DurationVar(&o.Reconcile, "soak-reconcile-interval", time.Minute, "the soak worker's --reconcile-interval")
	fs.DurationVar(&o.Settle, "soak-settle", 20*time.Minute, "bound on the wait for everything to be at rest after the last fault")
}

func (o SoakOptions) validate() error {
	if !o.Run {
		return nil
	}
	if o.Jobs <= 0 || o.Duration < time.Minute || o.JobDuration <= 0 || o.Reconcile <= 0 || o.Settle <= 0 {
		return errors.New("--soak-jobs, --soak-job-duration, --soak-reconcile-interval and --soak-settle must be positive, --soak-duration at least 1m")
	}
	return nil
}

// soakPhase is one soak run and what it watches.
type soakPhase struct {
	e     *env
	ns    string
	pools []string
	// setIDs are the scale-set pools' sets (soakScaleSetPools' order) as their listeners'
	// workflow ids name them, so the listeners (which outlive their pools by design) can be
	// ended with the phase.
	setIDs []int64
	worker *workerProcess
	pods   *podRecord
	// workerExits counts the worker processes that ended by themselves (keepWorker);
	// workersStarted those the phase started, which numbers their logs; ungracefulStops the
	// ones a rolling deploy had to kill.
	workerExits, workersStarted, ungracefulStops int
	// workerSessions are the sets' sessions when a worker was last killed or stopped, by set
	// id: sessions its listeners leave to the service until they notice.
	workerSessions map[int64]string
	// faultsOver is when the last fault ended.
	faultsOver time.Time

	mu   sync.Mutex
	jobs []int64
	// setJobs are the jobs of the scale-set pools, among jobs.
	setJobs []int64
}

// soak runs the phase: the worker binary as its own process (so a kill is a kill), two pools,
// jobs queued at a steady rate while the fault plan runs, then the wait for rest and the
// count of what went wrong. The in-process worker is stopped for the phase and started again
// after it.
func (e *env) soak(ctx context.Context) (_ SoakResult, err error) {
	o := e.opts.Soak
	seed := o.Seed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	plan := planFaults(seed, o.Duration)
	res := SoakResult{Seed: seed, Jobs: o.Jobs, Pools: soakPools + len(soakScaleSetPools), ScaleSetPool: soakScaleSetPool,
		OfferingScaleSetPool: soakOfferingPool, QueueSeconds: o.Duration.Seconds(), JobSeconds: o.JobDuration.Seconds(),
		ReconcileSeconds: o.Reconcile.Seconds()}
	e.say("soak: seed %d (repeat with --soak-seed %d): %d jobs over %s, %d faults", seed, seed, o.Jobs, o.Duration, len(plan))
	if err := e.stopInProcessWorker(); err != nil {
		return res, fmt.Errorf("stop the in-process worker: %w", err)
	}
	defer func() {
		if serr := e.startWorker(); serr != nil && err == nil {
			err = serr
		}
	}()
	s := &soakPhase{e: e}
	defer s.tearDown()
	if err := s.setUp(ctx); err != nil {
		return res, err
	}
	began := time.Now()
	queueCtx, stopQueueing := context.WithCancel(ctx)
	defer stopQueueing()
	queued := make(chan time.Time, 1)
	go func() { queued <- s.queueJobs(queueCtx, began) }()
	res.Faults, err = s.runFaults(ctx, plan, began)
	if err != nil {
		stopQueueing()
		<-queued
		return res, err
	}
	lastQueued := <-queued
	quiet := s.faultsOver
	if quiet.IsZero() {
		quiet = lastQueued
	}
	res.FaultsOverSeconds = round1(quiet.Sub(began).Seconds())
	res.LastQueuedSeconds = round1(lastQueued.Sub(began).Seconds())
	e.say("soak: %d jobs queued, faults over; waiting (at most %s) for everything to be at rest", len(s.jobIDs()), o.Settle)
	res.Converged, res.ConvergeSeconds = s.waitRest(ctx, quiet)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return s.measure(ctx, res)
}

// setUp starts the worker process, the pools and the pod record, and waits until the intake
// routes to the webhook pools and the scale-set pools' listeners hold their sessions.
func (s *soakPhase) setUp(ctx context.Context) error {
	var err error
	if s.ns, err = s.e.newNamespace(ctx, "soak"); err != nil {
		return err
	}
	if err := s.e.world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: soakOrg + "/app"}); err != nil {
		return err
	}
	if err := s.startWorker(ctx); err != nil {
		return err
	}
	if s.pods, err = recordPods(ctx, s.e, s.ns); err != nil {
		return err
	}
	var specs []workflows.PoolSpec
	for i := range soakPools {
		specs = append(specs, s.addPool(fmt.Sprintf("soak-%c", 'a'+i)))
	}
	webhookPools := slices.Clone(s.pools)
	s.e.offerJobs(soakOfferingPool)
	for _, name := range soakScaleSetPools {
		spec := s.addPool(name)
		spec.ScaleSet, spec.WarmRegistrations = &workflows.ScaleSetSpec{}, 0
		specs = append(specs, spec)
	}
	if err := s.e.apply(ctx, specs...); err != nil {
		return err
	}
	if err := s.e.intake.waitRoutable(ctx, webhookPools...); err != nil {
		return err
	}
	s.setIDs, err = waitListening(ctx, s.e, soakScaleSetPools...)
	return err
}

// addPool adds a pool to the phase's and returns its spec: its own label, its jobs
// lasting the soak's job duration.
func (s *soakPhase) addPool(name string) workflows.PoolSpec {
	s.pools = append(s.pools, name)
	spec := poolSpec(name, soakOrg, s.ns, 0, soakPoolMax)
	spec.Labels = soakLabels(name)
	spec.Template.Annotations = map[string]string{simulator.AnnotationWorkDuration: s.e.opts.Soak.JobDuration.String()}
	return spec
}

// soakLabels are a soak pool's labels and its jobs' runs-on: the pools share an organization,
// so a label of its own routes each job to one pool (a scale-set pool's jobs to its set; their
// webhooks reach the intake too, as they would from an organization hook, and change nothing:
// a scale-set pool's demand is its set's).
func soakLabels(pool string) []string { return append(append([]string{}, jobLabels...), pool) }

// startWorker starts a worker process that keeps the reconcile Schedule for the soak's
// organization hook, as a production worker given --reconcile-hook does.
func (s *soakPhase) startWorker(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, workerStartBound)
	defer cancel()
	s.workersStarted++
	w, err := s.e.spawnWorker(ctx, workerSpawn{namespace: s.ns, logSuffix: fmt.Sprintf("-soak-worker-%d.log", s.workersStarted), flags: []string{
		"--reconcile-interval", s.e.opts.Soak.Reconcile.String(),
		"--reconcile-hook", fmt.Sprintf("org:%s/%d", soakOrg, soakHookID),
	}})
	if err != nil {
		return err
	}
	s.worker = w
	return nil
}

// keepWorker starts a new worker process when the one running has exited by itself (as
// Kubernetes would restart it), and counts it: only the fault plan kills workers.
func (s *soakPhase) keepWorker(ctx context.Context) error {
	if s.worker == nil || !s.worker.exited() {
		return nil
	}
	s.workerExits++
	s.e.say("soak: the worker process exited by itself (log %s); starting a new one", s.worker.logPath)
	s.leavingWorker()
	s.worker = nil
	return s.startWorker(ctx)
}

// queueJobs queues the soak's jobs at a steady rate from began, alternating between the
// pools, and returns when the last was queued.
func (s *soakPhase) queueJobs(ctx context.Context, began time.Time) time.Time {
	o := s.e.opts.Soak
	every := o.Duration / time.Duration(o.Jobs)
	for i := range o.Jobs {
		if sleep(ctx, time.Until(began.Add(time.Duration(i)*every))) != nil {
			break
		}
		pool := s.pools[i%len(s.pools)]
		j, err := s.e.world.GitHub.QueueJob(githubdouble.JobSpec{Repository: soakOrg + "/app", Labels: soakLabels(pool)})
		if err != nil {
			s.e.log.Warn("soak: queue a job", "error", err)
			continue
		}
		s.mu.Lock()
		s.jobs = append(s.jobs, j.ID)
		if slices.Contains(soakScaleSetPools, pool) {
			s.setJobs = append(s.setJobs, j.ID)
		}
		s.mu.Unlock()
	}
	return time.Now()
}

func (s *soakPhase) jobIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.jobs...)
}

func (s *soakPhase) queuedSoFar() int { return len(s.jobIDs()) }

// setJobIDs are the scale-set pools' jobs queued so far.
func (s *soakPhase) setJobIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.setJobs...)
}

// waitRest waits, at most the settle bound, until everything is at rest, and returns whether
// it came to rest and how long after quiet (the last fault's end).
func (s *soakPhase) waitRest(ctx context.Context, quiet time.Time) (bool, float64) {
	wait, cancel := context.WithTimeout(ctx, s.e.opts.Soak.Settle)
	defer cancel()
	err := pollEvery(wait, soakRestCheck, "the soak at rest", func() (bool, error) {
		left, err := s.unrest(wait)
		if err != nil {
			s.e.log.Warn("soak: look at the world", "error", err)
			return false, nil
		}
		return left == "", nil
	})
	secs := round1(time.Since(quiet).Seconds())
	if err != nil {
		look, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		left, _ := s.unrest(look)
		s.e.say("soak: NOT at rest %.0fs after the last fault: %s", secs, left)
		return false, secs
	}
	s.e.say("soak: at rest %.0fs after the last fault", secs)
	return true, secs
}

// unrest says what is not at rest yet ("" when everything is): a job not completed, a pool
// with runners or reservations, a runner workflow or scale window running, a pod, Secret or
// GitHub registration of the pools.
func (s *soakPhase) unrest(ctx context.Context) (string, error) {
	if err := s.keepWorker(ctx); err != nil {
		return "", err
	}
	var left []string
	if n := len(s.jobIDs()) - countJobs(s.e.world.GitHub, s.jobIDs(), githubdouble.StatusCompleted); n > 0 {
		left = append(left, fmt.Sprintf("%d jobs not completed", n))
	}
	for _, p := range s.pools {
		st, err := s.e.status(ctx, p)
		if err != nil {
			return "", err
		}
		if len(st.Runners) > 0 || st.Reservations > 0 {
			left = append(left, fmt.Sprintf("%s: %d runners, %d reservations", p, len(st.Runners), st.Reservations))
		}
	}
	for what, query := range map[string]string{"runner workflows": s.runnerQuery(), "scale windows": idQuery(workflows.ScaleWindowWorkflowID, s.pools)} {
		n, err := s.e.c.CountWorkflow(ctx, countRequest(query+runningOnly))
		if err != nil {
			return "", err
		}
		if n.GetCount() > 0 {
			left = append(left, fmt.Sprintf("%d %s running", n.GetCount(), what))
		}
	}
	objs, err := s.leftObjects(ctx)
	if err != nil {
		return "", err
	}
	if len(objs) > 0 {
		left = append(left, fmt.Sprintf("%d pods, Secrets or registrations%s", len(objs), examples(objs)))
	}
	return strings.Join(left, "; "), nil
}

// countJobs counts the jobs with the status at the double.
func countJobs(gh *githubdouble.Server, jobs []int64, status string) int {
	n := 0
	for _, id := range jobs {
		if j, _ := gh.Job(id); j.Status == status {
			n++
		}
	}
	return n
}

func (s *soakPhase) runnerQuery() string {
	return fmt.Sprintf("WorkflowType = %q AND %s", workflows.RunnerWorkflowType, poolQuery(s.pools))
}

// tearDown stops the worker process, ends the pools and their runner workflows, removes the
// reconcile Schedule the worker made and the namespace, so the next phase starts clean.
func (s *soakPhase) tearDown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s.worker != nil {
		s.worker.stop()
	}
	if s.pods != nil {
		s.pods.stop()
	}
	s.e.terminatePools(ctx, s.pools...)
	endListeners(s.e, soakScaleSetPools, s.setIDs)
	if len(s.pools) > 0 {
		if runs, err := listRuns(ctx, s.e.c, s.runnerQuery()+runningOnly); err == nil {
			for _, r := range runs {
				_ = s.e.c.TerminateWorkflow(ctx, r.id, r.runID, "benchmark phase over")
			}
		}
	}
	_ = s.e.c.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Delete(ctx)
	if s.ns != "" {
		_ = s.e.world.Kubernetes.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{})
	}
}

// podRecord remembers every pod seen in the soak's namespace, by runner name: two pods (two
// UIDs) for one runner name are a duplicate.
type podRecord struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	uids   map[string]map[types.UID]bool
}

// recordPods watches the namespace's pods with an informer (which lists again after a lost
// watch, as through an API-server pause) until stop.
func recordPods(ctx context.Context, e *env, ns string) (*podRecord, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &podRecord{cancel: cancel, uids: map[string]map[types.UID]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.world.Kubernetes, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	note := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			r.note(p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }}); err != nil {
		cancel()
		return nil, fmt.Errorf("soak pod informer: %w", err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return r, nil
}

func (r *podRecord) note(p *corev1.Pod) {
	name := p.Labels[runnerpod.LabelRunner]
	if name == "" {
		name = p.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.uids[name] == nil {
		r.uids[name] = map[types.UID]bool{}
	}
	r.uids[name][p.UID] = true
}

// duplicates names the runners that had more than one pod.
func (r *podRecord) duplicates() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, uids := range r.uids {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s (%d pods)", name, len(uids)))
		}
	}
	return out
}

func (r *podRecord) stop() { r.cancel() }
