package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	// idleOrg is the organization the memory figure's runners register in; no job is ever
	// queued there, so its runners stay idle.
	idleOrg = "org-idle"
	// rssSettle is how long the worker is left alone before its RSS is read, and rssSamples
	// how many readings, one second apart, the median is taken of (the Go runtime returns
	// freed memory to the OS in the background, so one reading can catch a peak).
	rssSettle  = 5 * time.Second
	rssSamples = 5
)

// memory measures figure 5 with the worker binary as its own process: its RSS with no runner
// workflow, then with K idle runner workflows alive for each K (ascending; each step adds
// runners to the ones already up).
func (e *env) memory(ctx context.Context) (MemoryResult, error) {
	if err := e.stopInProcessWorker(); err != nil {
		return MemoryResult{}, fmt.Errorf("stop the in-process worker: %w", err)
	}
	ns, err := e.newNamespace(ctx, "idle")
	if err != nil {
		return MemoryResult{}, err
	}
	if err := e.world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: idleOrg + "/app"}); err != nil {
		return MemoryResult{}, err
	}
	w, err := e.startWorkerProcess(ctx, ns)
	if err != nil {
		return MemoryResult{}, err
	}
	defer w.stop()
	var res MemoryResult
	if res.BaselineRSSKiB, err = w.settledRSS(ctx); err != nil {
		return res, err
	}
	e.say("memory: worker process %d, baseline RSS %d KiB", w.cmd.Process.Pid, res.BaselineRSSKiB)
	for _, k := range e.opts.Idle {
		p, err := e.idlePoint(ctx, w, ns, k, res.BaselineRSSKiB)
		if err != nil {
			return res, err
		}
		res.Points = append(res.Points, p)
		e.say("memory: %d of %d runners idle, %d runner workflows alive, after %.0fs; RSS %d KiB, %.1f KiB per runner workflow",
			p.Idle, k, p.Alive, p.SetupSeconds, p.RSSKiB, p.KiBPerRunner)
		// After the RSS readings: the profile's collection changes what the next reading sees.
		if b, err := e.profile(ctx, w, k); err != nil {
			e.say("memory: no profile of the worker with %d idle runners: %v", k, err)
		} else {
			b.say(e)
		}
		if !p.Complete {
			e.say("memory: %d idle runners not reached within --phase-timeout %s; larger steps skipped", k, e.opts.PhaseTimeout)
			return res, nil
		}
	}
	// Last, because drained runners leave: what waking an idle runner costs at the largest K.
	if err := e.wakeUps(ctx, w, idlePoolNames(res.Points[len(res.Points)-1].Runners)); err != nil {
		e.say("wake-up: not measured: %v", err)
	}
	return res, nil
}

// idlePoolNames are the names scaleIdlePools gives the pools holding k runners.
func idlePoolNames(k int) []string {
	var names []string
	for i := 0; i*workflows.MaxPoolReplicas < k; i++ {
		names = append(names, idlePoolName(i))
	}
	return names
}

func idlePoolName(i int) string { return fmt.Sprintf("idle-%d", i+1) }

// idlePoint brings the idle runners up to k and reads the worker's RSS. If k are not idle
// within the phase timeout, it measures what is alive then and says the point is incomplete.
func (e *env) idlePoint(ctx context.Context, w *workerProcess, ns string, k, baseline int) (MemoryPoint, error) {
	step, cancel := context.WithTimeout(ctx, e.opts.PhaseTimeout)
	defer cancel()
	began := time.Now()
	pools, waitErr := e.scaleIdlePools(step, ns, k, w)
	if waitErr != nil && (ctx.Err() != nil || step.Err() == nil) {
		return MemoryPoint{}, waitErr // interrupted, or failed for another reason than time
	}
	p := MemoryPoint{Runners: k, Complete: waitErr == nil, SetupSeconds: round1(time.Since(began).Seconds())}
	var err error
	if p.RSSKiB, err = w.settledRSS(ctx); err != nil {
		return p, err
	}
	alive, err := e.c.CountWorkflow(ctx, countRequest(fmt.Sprintf("WorkflowType = %q AND %s%s",
		workflows.RunnerWorkflowType, poolQuery(pools), runningOnly)))
	if err != nil {
		return p, err
	}
	p.Alive, p.Idle = int(alive.GetCount()), idleAtGitHub(e.world.GitHub.Runners())
	p.KiBPerRunner = round1(float64(p.RSSKiB-baseline) / float64(max(p.Alive, 1)))
	return p, nil
}

// scaleIdlePools applies pools holding k runners in all, at most MaxPoolReplicas each (min =
// max, so each pool keeps exactly its share), and waits until they are idle. Pools are applied
// one after another, each once the runners before it are idle: a pool's first decision starts
// all its runners at once, and several such pools together keep a 2-core worker busy past
// `starter apply`'s wait for the apply update. It returns the pools' names.
func (e *env) scaleIdlePools(ctx context.Context, ns string, k int, w *workerProcess) ([]string, error) {
	var names []string
	for i, want := 0, 0; want < k; i++ {
		n := min(k-want, workflows.MaxPoolReplicas)
		name := idlePoolName(i)
		names, want = append(names, name), want+n
		if err := e.apply(ctx, poolSpec(name, idleOrg, ns, n, n)); err != nil {
			return names, err
		}
		if err := e.waitIdle(ctx, ns, names, want, w); err != nil {
			return names, err
		}
	}
	return names, nil
}

// waitIdle waits until k runners are idle: online and not busy at GitHub, their pods Running,
// and their pools counting them idle. Cheap checks go first; the pod list is the costly one.
func (e *env) waitIdle(ctx context.Context, ns string, pools []string, k int, w *workerProcess) error {
	return pollEvery(ctx, 2*time.Second, fmt.Sprintf("%d idle runners", k), func() (bool, error) {
		if w.exited() {
			return false, fmt.Errorf("worker process exited; its log is %s", w.logPath)
		}
		if n := idleAtGitHub(e.world.GitHub.Runners()); n < k {
			return false, nil
		}
		idle := 0
		for _, p := range pools {
			st, err := e.status(ctx, p)
			if err != nil {
				return false, err
			}
			idle += st.RunnersByState[workflows.RunnerIdle]
		}
		if idle < k {
			return false, nil
		}
		pods, err := e.world.Kubernetes.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: runnerpod.LabelManagedBy + "=" + runnerpod.ManagedByValue, FieldSelector: "status.phase=Running",
		})
		return err == nil && len(pods.Items) >= k, err
	})
}

func idleAtGitHub(runners []githubdouble.Runner) int {
	n := 0
	for _, r := range runners {
		if r.Scope == githubdouble.OrgScope(idleOrg) && r.Status == "online" && !r.Busy {
			n++
		}
	}
	return n
}

// workerProcess is runnerflow's worker binary running on its own.
type workerProcess struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	// addrs are its metrics and profile listeners.
	addrs workerAddrs
}

// startWorkerProcess builds the worker binary (unless one was given) and starts it against
// the world, watching the memory figure's namespace, then waits until it polls Temporal.
func (e *env) startWorkerProcess(ctx context.Context, ns string) (*workerProcess, error) {
	var flags []string
	if q := e.opts.MemoryKubeQPS; q > 0 {
		flags = []string{"--kube-qps", strconv.FormatFloat(q, 'f', -1, 64), "--kube-burst", strconv.Itoa(int(2 * q))}
	}
	return e.spawnWorker(ctx, workerSpawn{namespace: ns, logSuffix: "-worker.log", flags: flags})
}

// workerSpawn says how to start one worker process: the namespace it watches, the suffix of
// its log file beside the benchmark's log, and flags beyond the ones every worker gets.
type workerSpawn struct {
	namespace, logSuffix string
	flags                []string
}

// workerBinary builds the worker binary once per run, unless one was given.
func (e *env) workerBinary(ctx context.Context) (string, error) {
	if e.opts.WorkerBinary != "" {
		return e.opts.WorkerBinary, nil
	}
	if e.builtWorker != "" {
		return e.builtWorker, nil
	}
	bin := filepath.Join(e.world.Dir(), "runnerflow-worker")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/runnerflow/runnerflow/worker")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the worker: %v\n%s", err, out)
	}
	e.builtWorker = bin
	return bin, nil
}

// spawnWorker starts a worker process as s says and waits until it polls Temporal.
func (e *env) spawnWorker(ctx context.Context, s workerSpawn) (*workerProcess, error) {
	bin, err := e.workerBinary(ctx)
	if err != nil {
		return nil, err
	}
	// Beside the benchmark's log, not in the world's directory, so it outlives the run.
	logPath := strings.TrimSuffix(e.logFile.Name(), filepath.Ext(e.logFile.Name())) + s.logSuffix
	w := &workerProcess{logPath: logPath, done: make(chan struct{})}
	logFile, err := os.Create(w.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := []string{
		"--temporal-address", e.world.Temporal.Address, "--namespace", e.world.Temporal.Namespace,
		"--kubeconfig", e.world.Kube.KubeconfigPath, "--watch-namespace", s.namespace,
		"--github-url", e.world.GitHub.URL(), "--github-points-per-minute", strconv.Itoa(e.opts.GitHubPointsPerMinute),
		// Metrics stay on, as in production, on a free port so a second run or the demo never
		// clashes; the profiles too, for the breakdown of each step (the worker logs both ports).
		"--metrics-listen", "127.0.0.1:0", "--pprof-listen", "127.0.0.1:0",
	}
	w.cmd = exec.Command(bin, append(args, s.flags...)...)
	w.cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+e.world.GitHubToken)
	w.cmd.Stdout, w.cmd.Stderr = logFile, logFile
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the worker: %w", err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	identity := fmt.Sprintf("/%d", w.cmd.Process.Pid)
	err = poll(ctx, "the worker process to poll Temporal", func() (bool, error) {
		if w.exited() {
			return false, fmt.Errorf("worker process exited; its log is %s", w.logPath)
		}
		resp, err := e.c.DescribeTaskQueue(ctx, workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(resp.GetPollers(), func(p *taskqueuepb.PollerInfo) bool {
			return strings.HasSuffix(p.GetIdentity(), identity)
		}) {
			return false, nil
		}
		var found bool
		w.addrs, found, err = readWorkerAddrs(w.logPath)
		return found, err
	})
	if err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

func (w *workerProcess) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// workerStopGrace bounds a worker's stop after SIGTERM: its --stop-timeout (30 s by default)
// for the activities running, then the close of its sessions (a few seconds).
const workerStopGrace = 45 * time.Second

// stop asks the worker to stop (SIGTERM, as Kubernetes does) and kills it if it has not
// stopped within workerStopGrace; it says whether the worker stopped by itself.
func (w *workerProcess) stop() bool {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		return true
	case <-time.After(workerStopGrace):
		_ = w.cmd.Process.Kill()
		<-w.done
		return false
	}
}

// kill ends the worker at once (SIGKILL, as the out-of-memory killer or a lost node does):
// no activity finishes, nothing is released.
func (w *workerProcess) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// settledRSS waits rssSettle, then returns the median of rssSamples readings of VmRSS.
func (w *workerProcess) settledRSS(ctx context.Context) (int, error) {
	var samples []int
	wait := rssSettle
	for range rssSamples {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
		wait = time.Second
		kib, err := readRSS(w.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		samples = append(samples, kib)
	}
	slices.Sort(samples)
	return samples[len(samples)/2], nil
}

// readRSS reads a process's resident set size in KiB from /proc/<pid>/status.
func readRSS(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the worker's RSS: %w", err)
	}
	defer f.Close()
	return parseRSS(bufio.NewScanner(f))
}

// parseRSS finds "VmRSS:   123456 kB" in a /proc status file.
func parseRSS(s *bufio.Scanner) (int, error) {
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == "VmRSS:" && fields[2] == "kB" {
			return strconv.Atoi(fields[1])
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS line in the process status")
}
