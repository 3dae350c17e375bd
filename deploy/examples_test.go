package deploy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/internal/poolspec"
	"github.com/runnerflow/runnerflow/workflows"
)

// The example pools parse with the same parser `starter apply` uses, and are what their
// comments say: an organization pool of ephemeral runners with a Docker sidecar, and a
// repository pool with a claim per slot, both in the namespace the worker's Role covers.
func TestExamplePoolsAreValid(t *testing.T) {
	pools, err := poolspec.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatalf("examples/pools.yaml: %v", err)
	}
	byName := map[string]workflows.PoolSpec{}
	for _, p := range pools {
		byName[p.Name] = p
		if p.Namespace != deploy.Namespace {
			t.Errorf("pool %s puts runners in %q; the worker's Role covers %q only", p.Name, p.Namespace, deploy.Namespace)
		}
	}
	org, ok := byName["org-docker"]
	if !ok || org.Organization == "" || !org.IsEphemeral() || org.Stateful() {
		t.Errorf("org-docker: want an ephemeral, stateless organization pool, got %+v", org)
	}
	if !slices.ContainsFunc(org.Template.Spec.InitContainers, isNativeSidecar) {
		t.Error("org-docker: want the Docker daemon as a native sidecar (init container with restartPolicy Always)")
	}
	repo, ok := byName["repo-cache"]
	if !ok || repo.Repository == "" || !repo.Stateful() {
		t.Errorf("repo-cache: want a stateful repository pool, got %+v", repo)
	}
	if len(pools) != 2 {
		t.Errorf("%d pools, want the two described", len(pools))
	}
}

func isNativeSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// The pools' pod and claim templates are admitted by the real API server when the worker's
// ServiceAccount creates them (server-side dry run: validated, authorized and admitted in
// full, not stored).
func TestExamplePoolTemplatesAreAdmittedForTheWorker(t *testing.T) {
	applyBase(t)
	pools, err := poolspec.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := serviceAccountClient(t, deploy.WorkerServiceAccount)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, p := range pools {
		for i, c := range p.VolumeClaimTemplates {
			claim := c.DeepCopy()
			claim.Name = workflows.SlotClaimName(p.Name, c.Name, i)
			if _, err := w.CoreV1().PersistentVolumeClaims(p.Namespace).Create(ctx, claim, dryRun); err != nil {
				t.Errorf("pool %s: claim template %s: %v", p.Name, c.Name, err)
			}
		}
		pod := &corev1.Pod{ObjectMeta: *p.Template.ObjectMeta.DeepCopy(), Spec: *p.Template.Spec.DeepCopy()}
		pod.Name = workflows.RunnerName(p.Name, "abcd", 1)
		// Claims replace the templates' volume names, as the worker mounts a slot's claims.
		for _, c := range p.VolumeClaimTemplates {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: workflows.SlotClaimName(p.Name, c.Name, 0)}}})
		}
		if _, err := w.CoreV1().Pods(p.Namespace).Create(ctx, pod, dryRun); err != nil {
			t.Errorf("pool %s: pod template: %v", p.Name, err)
		}
	}
}
