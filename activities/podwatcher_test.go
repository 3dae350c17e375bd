package activities

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// recordingSignaler stands in for the Temporal client: the watcher's contract is the signals it
// sends (the integration tests send them to the real server).
type recordingSignaler struct {
	mu      sync.Mutex
	signals map[string][]workflows.PodStatusSignal
	calls   int
	closed  map[string]bool
}

func (r *recordingSignaler) SignalWorkflow(_ context.Context, workflowID, runID, name string, arg any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if name != workflows.SignalPodStatus || runID != "" {
		return serviceerror.NewInvalidArgument("unexpected signal " + name)
	}
	if r.closed[workflowID] {
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	r.signals[workflowID] = append(r.signals[workflowID], arg.(workflows.PodStatusSignal))
	return nil
}

func (r *recordingSignaler) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func TestPodWatcherSignalsTheEndOfEachPodsRunOnce(t *testing.T) {
	e := newEnv(t)
	rec := &recordingSignaler{signals: map[string][]workflows.PodStatusSignal{}, closed: map[string]bool{"runner/pool-a/closed": true}}
	w, err := NewPodWatcher(PodWatcherConfig{Client: e.kube, Temporal: rec, Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()

	failed := e.podInput("pool-a-ab12-1")
	failedPod, err := e.k8s.CreateRunnerPod(e.ctx, failed)
	if err != nil {
		t.Fatal(err)
	}
	deleted := e.podInput("pool-a-ab12-2")
	deletedPod, err := e.k8s.CreateRunnerPod(e.ctx, deleted)
	if err != nil {
		t.Fatal(err)
	}
	e.createPod("unannotated", map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue}, nil)
	e.createPod("closed", map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue},
		map[string]string{runnerpod.AnnotationWorkflowID: "runner/pool-a/closed"})

	// A pod that runs and fails: Running is no news, Failed is its end, its deletion afterwards
	// is no news either.
	e.setPhase(failed.Name, corev1.PodRunning, "")
	e.touchLabels(failed.Name)
	e.setPhase(failed.Name, corev1.PodFailed, "Evicted")
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, failed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod deleted while it runs: its deletion is its end.
	e.setPhase(deleted.Name, corev1.PodRunning, "")
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, deleted.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The closed workflow's pod ends too; its NotFound is dropped, not retried.
	e.setPhase("closed", corev1.PodRunning, "")
	e.setPhase("closed", corev1.PodSucceeded, "")

	var failedSigs, deletedSigs []workflows.PodStatusSignal
	waitFor(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		failedSigs, deletedSigs = slices.Clone(rec.signals[failed.WorkflowID]), slices.Clone(rec.signals[deleted.WorkflowID])
		return len(failedSigs) > 0 && len(deletedSigs) > 0 && rec.calls >= 3
	})
	want := []workflows.PodStatusSignal{{Pod: failed.Name, UID: failedPod.UID, Phase: workflows.PodFailed, Reason: "Evicted"}}
	if !slices.Equal(failedSigs, want) {
		t.Errorf("failed pod: signals %+v, want %+v", failedSigs, want)
	}
	if len(deletedSigs) != 1 || deletedSigs[0].UID != deletedPod.UID ||
		(deletedSigs[0].Phase != workflows.PodGone && !deletedSigs[0].Deleting) {
		t.Errorf("deleted pod: signals %+v, want one saying it is deleted or gone", deletedSigs)
	}
	if got := rec.total(); got != 3 {
		t.Errorf("%d signal calls, want 3 (one per ended pod)", got)
	}
}

func (e *env) createPod(name string, labels, annotations map[string]string) {
	e.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "x"}}}}
	if _, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) setPhase(name string, phase corev1.PodPhase, reason string) {
	e.t.Helper()
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pod.Status.Phase, pod.Status.Reason = phase, reason
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) touchLabels(name string) {
	e.t.Helper()
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pod.Labels["touched"] = "yes"
	if _, err := e.kube.CoreV1().Pods(e.ns).Update(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls cond until it holds; the test's context bounds the wait.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flakySignaler fails every signal until up is set, as a Temporal server that is restarting.
type flakySignaler struct {
	mu       sync.Mutex
	failures map[string]int // by signal name
	up       bool
	sent     []string
}

func (f *flakySignaler) SignalWorkflow(_ context.Context, workflowID, _, name string, _ any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		f.failures[name]++
		return serviceerror.NewUnavailable("connection refused")
	}
	f.sent = append(f.sent, name+" "+workflowID)
	return nil
}

func (f *flakySignaler) failed(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures[name]
}

func TestPodWatcherRetriesAStartSignalUntilTemporalAnswers(t *testing.T) {
	sig := &flakySignaler{failures: map[string]int{}}
	w, err := NewPodWatcher(PodWatcherConfig{Client: fake.NewClientset(), Temporal: sig})
	if err != nil {
		t.Fatal(err)
	}
	w.queue = newSignalQueue(time.Millisecond) // the backoff's cap is not under test
	defer w.queue.ShutDown()
	start := podEvent{workflowID: "runner/pool-a/pool-a-ab12-1", name: workflows.SignalPodStart, signal: workflows.PodStatusSignal{Scheduled: true}}
	end := podEvent{workflowID: "runner/pool-a/pool-a-ab12-2", name: workflows.SignalPodStatus, signal: workflows.PodStatusSignal{Phase: workflows.PodFailed}}
	w.queue.Add(start)
	w.queue.Add(end)
	// Temporal down through every try an end signal gets: the end signal is given up (its
	// workflow's own checks find the pod's end), the start signal is not.
	tries := maxSignalRetries + 1
	for sig.failed(workflows.SignalPodStart) < tries || sig.failed(workflows.SignalPodStatus) < tries {
		if !w.sendNext(t.Context(), w.queue) {
			t.Fatal("queue shut down")
		}
	}
	if w.queue.NumRequeues(start) == 0 {
		t.Fatalf("the start signal was given up after %d tries", sig.failed(workflows.SignalPodStart))
	}
	sig.mu.Lock()
	sig.up = true
	sig.mu.Unlock()
	for len(sig.sent) == 0 {
		w.sendNext(t.Context(), w.queue)
	}
	if want := []string{workflows.SignalPodStart + " " + start.workflowID}; !slices.Equal(sig.sent, want) {
		t.Errorf("sent %v once Temporal answered, want %v", sig.sent, want)
	}
	if n := w.queue.Len(); n != 0 {
		t.Errorf("%d signals still queued", n)
	}
}
