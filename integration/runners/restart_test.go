package runners

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestWorkerKilledAndRestartedTwice runs the same 20 ephemeral runners with the worker as a
// separate process, killed with SIGKILL and restarted twice in the middle: while pods are being
// created, and while jobs are running. The end state is the same as without the kills, and
// nothing was done twice: one pod per runner, one GitHub registration per runner.
func TestWorkerKilledAndRestartedTwice(t *testing.T) {
	s := newScenario(t, "kill")
	bin := buildWorker(t)
	pods := watchPods(t, s.ns)
	c := dialTemporal(t)
	worker := startWorkerProcess(t, bin, s.ns, 1)

	var inputs []workflows.RunnerInput
	for i := range runners {
		inputs = append(inputs, s.input(int64(i+1), true, map[string]string{simulator.AnnotationWorkDuration: "3s"}))
	}
	runs := s.start(c, inputs...)
	jobs := s.queueJobs(runners)

	eventually(t, 2*time.Minute, "the first runner pods", func() bool { return pods.names() >= 4 })
	worker.kill()
	worker = startWorkerProcess(t, bin, s.ns, 2)
	eventually(t, 3*time.Minute, "some jobs to complete", func() bool { return completedJobs(jobs) >= runners/3 })
	worker.kill()
	worker = startWorkerProcess(t, bin, s.ns, 3)

	res := results(t, runs, 5*time.Minute)
	for _, r := range res {
		if r.FinalState != workflows.RunnerDone {
			t.Errorf("runner %s ended %+v", r.Name, r)
		}
	}
	if n := completedJobs(jobs); n != runners {
		t.Errorf("%d of %d jobs completed", n, runners)
	}
	for name, uids := range pods.uids() {
		if len(uids) != 1 {
			t.Errorf("runner %s had %d pods, want 1", name, len(uids))
		}
	}
	if n := pods.names(); n != runners {
		t.Errorf("%d runner pod names, want %d", n, runners)
	}
	created := world.GitHub.Calls()[githubdouble.CallKey{Route: "POST /orgs/{org}/actions/runners/generate-jitconfig", Status: 201}]
	if created != runners {
		t.Errorf("%d JIT registrations for %d runners (calls: %s)", created, runners, githubCallReport())
	}
	s.assertCleanEnd(c, runs)
	assertNoCredentialInHistory(t, c, runs)
	retried, timedOut := interruptedWork(t, c, runs)
	t.Logf("the kills interrupted %d activity attempts and %d workflow tasks, all taken over by the next worker", retried, timedOut)
	t.Logf("GitHub API calls with two worker kills: %d for %d runners: %s", world.GitHub.TotalCalls(), runners, githubCallReport())
	worker.stop()
}

func completedJobs(ids []int64) int {
	n := 0
	for _, id := range ids {
		if j, _ := world.GitHub.Job(id); j.Status == githubdouble.StatusCompleted && j.Conclusion == githubdouble.ConclusionSuccess {
			n++
		}
	}
	return n
}

// buildWorker builds worker/main.go once for the test.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	out, err := exec.Command("go", "build", "-o", bin, "../../worker").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./worker: %v\n%s", err, out)
	}
	return bin
}

type workerProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startWorkerProcess starts the worker binary against the world, as an operator would.
func startWorkerProcess(t *testing.T, bin, namespace string, n int) *workerProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "worker-"+strconv.Itoa(n)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--temporal-address", world.Temporal.Address, "--namespace", world.Temporal.Namespace,
		"--kubeconfig", world.Kube.KubeconfigPath, "--watch-namespace", namespace,
		"--github-url", world.GitHub.URL(),
		// A free port: the default :9090 may be taken on a shared machine.
		"--metrics-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+world.GitHubToken)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workerProcess{t: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// kill ends the worker with SIGKILL: no graceful stop, activities die mid-flight.
func (p *workerProcess) kill() {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("worker exited on its own; log:\n%s", p.tail())
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	<-p.done
}

// stop ends the worker gracefully (SIGTERM), if it still runs.
func (p *workerProcess) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *workerProcess) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.TrimSpace(b))
}

// podWatch records every runner pod (by UID) that ever existed in a namespace.
type podWatch struct {
	mu     sync.Mutex
	byName map[string]map[string]bool
}

func watchPods(t *testing.T, namespace string) *podWatch {
	t.Helper()
	w := &podWatch{byName: map[string]map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(world.Kubernetes, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.byName[pod.Name] == nil {
				w.byName[pod.Name] = map[string]bool{}
			}
			w.byName[pod.Name][string(pod.UID)] = true
		}
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return w
}

func (w *podWatch) names() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byName)
}

func (w *podWatch) uids() map[string]map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]map[string]bool{}
	for k, v := range w.byName {
		out[k] = v
	}
	return out
}

// interruptedWork counts, over the runs' histories, activity attempts beyond the first and
// workflow tasks that timed out: the work a killed worker left behind.
func interruptedWork(t *testing.T, c client.Client, runs []client.WorkflowRun) (retried, timedOut int) {
	t.Helper()
	for _, run := range runs {
		it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
				retried += int(a.GetAttempt()) - 1
			}
			if ev.GetWorkflowTaskTimedOutEventAttributes() != nil {
				timedOut++
			}
		}
	}
	return retried, timedOut
}
