package activities

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

func (e *env) podInput(name string) workflows.CreateRunnerPodInput {
	in := podInput(workflows.RegistrationJIT)
	in.Name, in.SecretName, in.Namespace = name, name, e.ns
	in.WorkflowID = workflows.RunnerWorkflowID("pool-a", name)
	return in
}

func TestCreateRunnerPodCreatesThenAdopts(t *testing.T) {
	e := newEnv(t)
	in := e.podInput("pool-a-ab12-1")
	first, err := e.k8s.CreateRunnerPod(e.ctx, in)
	if err != nil || first.UID == "" || first.Adopted {
		t.Fatalf("create = %+v, %v", first, err)
	}
	again, err := e.k8s.CreateRunnerPod(e.ctx, in)
	if err != nil || !again.Adopted || again.UID != first.UID {
		t.Fatalf("retry = %+v, %v; want the same pod adopted", again, err)
	}
	pods, _ := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 {
		t.Errorf("%d pods, want 1", len(pods.Items))
	}
}

func TestCreateRunnerPodRefusesAPodItDoesNotOwn(t *testing.T) {
	e := newEnv(t)
	in := e.podInput("pool-a-ab12-2")
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}
	if _, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k8s.CreateRunnerPod(e.ctx, in); errType(err) != workflows.ErrNotOwned {
		t.Fatalf("error = %v, want NotOwned", err)
	}
}

func TestCreateRunnerPodWaitsForItsTerminatingPredecessor(t *testing.T) {
	e := newEnv(t)
	in := e.podInput("pool-a-ab12-3")
	// A finalizer keeps the deleted pod Terminating, as a kubelet does while it stops containers.
	pod, err := buildRunnerPod(in)
	if err != nil {
		t.Fatal(err)
	}
	pod.Finalizers = []string{"test.runnerflow.dev/hold"}
	if _, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, in.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.kube.CoreV1().Pods(e.ns).Patch(e.ctx, in.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	_, err = e.k8s.CreateRunnerPod(e.ctx, in)
	if errType(err) != workflows.ErrTransient {
		t.Fatalf("error = %v, want a retryable wait for the old pod", err)
	}
	st, err := e.k8s.GetRunnerPod(e.ctx, workflows.PodRef{Namespace: e.ns, Name: in.Name})
	if err != nil || !st.Exists || !st.Deleting {
		t.Errorf("pod status = %+v, %v; want it reported as being deleted", st, err)
	}
}

func TestSecretOwnerPodReadAndDeletes(t *testing.T) {
	e := newEnv(t)
	name := "pool-a-ab12-4"
	reg := e.registration(name)
	if _, err := e.gha.RegisterRunner(e.ctx, reg); err != nil {
		t.Fatal(err)
	}
	pod, err := e.k8s.CreateRunnerPod(e.ctx, e.podInput(name))
	if err != nil {
		t.Fatal(err)
	}
	owner := workflows.SetSecretOwnerInput{Namespace: e.ns, SecretName: name, PodName: name, PodUID: pod.UID}
	for range 2 { // idempotent
		if _, err := e.k8s.SetRunnerSecretOwner(e.ctx, owner); err != nil {
			t.Fatal(err)
		}
	}
	secret, _ := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if refs := secret.OwnerReferences; len(refs) != 1 || string(refs[0].UID) != pod.UID || refs[0].Kind != "Pod" {
		t.Errorf("owner references = %+v", refs)
	}
	if _, ok := secret.Data[runnerpod.SecretKeyJITConfig]; !ok {
		t.Error("setting the owner lost the secret's data")
	}

	ref := workflows.PodRef{Namespace: e.ns, Name: name, UID: pod.UID}
	st, err := e.k8s.GetRunnerPod(e.ctx, ref)
	if err != nil || !st.Exists || st.Phase != workflows.PodPending {
		t.Fatalf("pod status = %+v, %v", st, err)
	}
	if st, _ := e.k8s.GetRunnerPod(e.ctx, workflows.PodRef{Namespace: e.ns, Name: name, UID: "another-uid"}); st.Exists {
		t.Error("a pod with another UID was reported as ours")
	}
	// A delete pinned to another UID leaves the pod alone and counts as done.
	if _, err := e.k8s.DeleteRunnerPod(e.ctx, workflows.PodRef{Namespace: e.ns, Name: name, UID: "another-uid"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.k8s.GetRunnerPod(e.ctx, ref); !st.Exists {
		t.Fatal("a delete pinned to another UID removed our pod")
	}
	for range 2 { // NotFound is success
		if _, err := e.k8s.DeleteRunnerPod(e.ctx, ref); err != nil {
			t.Fatal(err)
		}
		if _, err := e.k8s.DeleteRunnerSecret(e.ctx, workflows.SecretRef{Namespace: e.ns, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := e.k8s.GetRunnerPod(e.ctx, ref); err != nil || st.Exists {
		t.Errorf("after delete: %+v, %v", st, err)
	}
}
