package activities

import (
	"cmp"
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// ListRunnerObjects lists the pods and Secrets labelled as runnerflow's (one list each, by
// label selector, in one namespace or all). Secrets are listed as metadata only
// (PartialObjectMetadataList): the credentials they hold never leave the API server for this.
// Slot claims are not listed: they outlive their runners on purpose. in.Kinds limits the
// listing (the warm namespace's is of Secrets only: the worker may not list pods there).
func (a *KubernetesActivities) ListRunnerObjects(ctx context.Context, in workflows.ListRunnerObjectsInput) (workflows.ListRunnerObjectsResult, error) {
	selector := labels.Set{runnerpod.LabelManagedBy: runnerpod.ManagedByValue}.String()
	var out workflows.ListRunnerObjectsResult
	if in.Lists(workflows.KindPod) {
		pods, err := a.Client.CoreV1().Pods(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return workflows.ListRunnerObjectsResult{}, classifyKubernetesError("list runner pods", err)
		}
		for _, p := range pods.Items {
			o := runnerObject(workflows.KindPod, p.ObjectMeta)
			o.OwnerSecret = ownerSecret(p.OwnerReferences)
			out.Objects = append(out.Objects, o)
		}
	}
	if in.Lists(workflows.KindSecret) {
		secrets := &metav1.PartialObjectMetadataList{}
		err := a.Client.CoreV1().RESTClient().Get().
			Namespace(in.Namespace).Resource("secrets").
			VersionedParams(&metav1.ListOptions{LabelSelector: selector}, metav1.ParameterCodec).
			SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").
			Do(ctx).Into(secrets)
		if err != nil {
			return workflows.ListRunnerObjectsResult{}, classifyKubernetesError("list runner secrets", err)
		}
		for _, s := range secrets.Items {
			out.Objects = append(out.Objects, runnerObject(workflows.KindSecret, s.ObjectMeta))
		}
	}
	slices.SortFunc(out.Objects, func(a, b workflows.RunnerObject) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

func runnerObject(kind workflows.OrphanKind, m metav1.ObjectMeta) workflows.RunnerObject {
	return workflows.RunnerObject{
		Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: string(m.UID),
		Pool: m.Labels[runnerpod.LabelPool], Runner: m.Labels[runnerpod.LabelRunner],
		WorkflowID: m.Annotations[runnerpod.AnnotationWorkflowID],
		CreatedAt:  m.CreationTimestamp.Time, Deleting: m.DeletionTimestamp != nil,
	}
}

// ownerSecret names the Secret among a pod's owners (a runner's pod is owned by its Secret).
func ownerSecret(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Kind == "Secret" && r.APIVersion == corev1.SchemeGroupVersion.String() {
			return r.Name
		}
	}
	return ""
}
