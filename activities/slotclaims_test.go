package activities

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/workflows"
)

func (e *env) slotClaims(pool string, slot int) workflows.EnsureSlotClaimsInput {
	return workflows.EnsureSlotClaimsInput{Pool: pool, Namespace: e.ns, Slot: slot, Claims: []workflows.SlotClaim{{
		Name: workflows.SlotClaimName(pool, "cache", slot),
		Template: corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "cache", Labels: map[string]string{"team": "ci"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		},
	}}}
}

func TestEnsureSlotClaimsCreatesOnceThenAdopts(t *testing.T) {
	e := newEnv(t)
	a := &SlotClaimActivities{Client: e.kube}
	in := e.slotClaims("pool-a", 0)
	first, err := a.EnsureSlotClaims(e.ctx, in)
	if err != nil || len(first.Created) != 1 {
		t.Fatalf("first = %+v, %v; want the claim created", first, err)
	}
	again, err := a.EnsureSlotClaims(e.ctx, in)
	if err != nil || len(again.Created) != 0 {
		t.Fatalf("again = %+v, %v; want the existing claim adopted", again, err)
	}
	pvc, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "pool-a-cache-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Labels["team"] != "ci" || pvc.Labels[LabelSlot] != "0" || pvc.Labels["runnerflow.dev/pool"] != "pool-a" {
		t.Errorf("claim labels %v", pvc.Labels)
	}
}

func TestEnsureSlotClaimsRefusesAForeignClaim(t *testing.T) {
	e := newEnv(t)
	in := e.slotClaims("pool-a", 1)
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: in.Claims[0].Name, Namespace: e.ns}, Spec: in.Claims[0].Template.Spec}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&SlotClaimActivities{Client: e.kube}).EnsureSlotClaims(e.ctx, in); errType(err) != workflows.ErrNotOwned {
		t.Fatalf("error = %v, want NotOwned", err)
	}
}
