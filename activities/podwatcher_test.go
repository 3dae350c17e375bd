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

func TestPodWatcherSignalsTransitionsThatMatter(t *testing.T) {
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

	in := e.podInput("pool-a-ab12-1")
	pod, err := e.k8s.CreateRunnerPod(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	e.createPod("unannotated", map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue}, nil)
	e.createPod("closed", map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue},
		map[string]string{runnerpod.AnnotationWorkflowID: "runner/pool-a/closed"})
	e.setPhase(in.Name, corev1.PodRunning, "")
	e.setPhase("closed", corev1.PodRunning, "")
	e.touchLabels(in.Name) // an update that changes no phase: no signal
	e.setPhase(in.Name, corev1.PodFailed, "Evicted")
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, in.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server may set the deletion timestamp before it removes the pod: that is a
	// transition too ("deletion started"), so it is signalled, but nothing is signalled twice.
	var sigs []workflows.PodStatusSignal
	waitFor(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		sigs = slices.Clone(rec.signals[in.WorkflowID])
		return len(sigs) > 0 && sigs[len(sigs)-1].Phase == workflows.PodGone
	})
	var phases []workflows.PodPhase
	for i, s := range sigs {
		if s.UID != pod.UID || s.Pod != in.Name {
			t.Errorf("signal %+v does not identify the pod", s)
		}
		if i > 0 && s == sigs[i-1] {
			t.Errorf("signal %+v sent twice in a row", s)
		}
		if len(phases) == 0 || phases[len(phases)-1] != s.Phase {
			phases = append(phases, s.Phase)
		}
	}
	if want := []workflows.PodPhase{workflows.PodRunning, workflows.PodFailed, workflows.PodGone}; !slices.Equal(phases, want) {
		t.Fatalf("phases %v, want %v (signals %+v)", phases, want, sigs)
	}
	if sigs[1].Reason != "Evicted" {
		t.Errorf("failed signal %+v lacks the reason", sigs[1])
	}
	// The closed workflow's NotFound is dropped, not retried: one call for its one transition.
	if got := rec.total(); got != len(sigs)+1 {
		t.Errorf("%d signal calls, want %d", got, len(sigs)+1)
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
