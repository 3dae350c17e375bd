package activities

import (
	"context"
	"maps"
	"strconv"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// LabelSlot carries a stateful slot's number on the claims made for it.
const LabelSlot = "runnerflow.dev/slot"

// SlotClaimActivities keep the PersistentVolumeClaims of stateful pools' slots, on
// workflows.TaskQueue. Claims are made once per slot and outlive the slot's runners, so the
// next runner in a slot mounts the same volume; they carry no owner reference for that reason.
type SlotClaimActivities struct {
	Client kubernetes.Interface
}

// Register registers the activities under their workflows.Activity* names.
func (a *SlotClaimActivities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.EnsureSlotClaims, activity.RegisterOptions{Name: workflows.ActivityEnsureSlotClaims})
}

// EnsureSlotClaims creates a slot's claims that do not exist yet and adopts those this pool made
// earlier. A claim of the same name that is not labelled for this pool and slot is NotOwned.
func (a *SlotClaimActivities) EnsureSlotClaims(ctx context.Context, in workflows.EnsureSlotClaimsInput) (workflows.EnsureSlotClaimsResult, error) {
	var out workflows.EnsureSlotClaimsResult
	claims := a.Client.CoreV1().PersistentVolumeClaims(in.Namespace)
	for _, c := range in.Claims {
		want := slotClaim(in, c)
		_, err := claims.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			out.Created = append(out.Created, c.Name)
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return out, classifyKubernetesError("create claim "+in.Namespace+"/"+c.Name, err)
		}
		existing, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return out, classifyKubernetesError("get existing claim "+in.Namespace+"/"+c.Name, err)
		}
		l := existing.Labels
		if l[runnerpod.LabelManagedBy] != runnerpod.ManagedByValue || l[runnerpod.LabelPool] != in.Pool || l[LabelSlot] != strconv.Itoa(in.Slot) {
			return out, notOwned("persistentvolumeclaim", in.Namespace, c.Name, "another owner (its runnerflow pool and slot labels do not match)")
		}
	}
	return out, nil
}

// slotClaim builds one claim from its template, labelled with the pool and slot.
func slotClaim(in workflows.EnsureSlotClaimsInput, c workflows.SlotClaim) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        c.Name,
			Namespace:   in.Namespace,
			Labels:      maps.Clone(c.Template.Labels),
			Annotations: maps.Clone(c.Template.Annotations),
		},
		Spec: *c.Template.Spec.DeepCopy(),
	}
	if pvc.Labels == nil {
		pvc.Labels = map[string]string{}
	}
	pvc.Labels[runnerpod.LabelManagedBy] = runnerpod.ManagedByValue
	pvc.Labels[runnerpod.LabelPool] = in.Pool
	pvc.Labels[LabelSlot] = strconv.Itoa(in.Slot)
	return pvc
}
