package activities

import (
	"context"
	"fmt"
	"strconv"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// StartWarmRunner starts a runner from a warm registration kept in the warm namespace: it
// writes the runner's own Secret in the runner's namespace from the warm one (same credential,
// same labels and owner), then creates the pod owned by that Secret. So the credential reaches
// the namespace the runner's pod — and its job — may read only when the runner starts, and
// leaves it with the runner (deleting the Secret takes the pod). Two writes, as a cold runner's
// registration makes; the warm Secret is left for the pool to remove with others in one request.
//
// Idempotent: a retry finds the Secret it wrote (owned by the same workflow) and adopts the pod
// as CreateRunnerPod does. A warm Secret that is gone, or that another workflow owns, fails for
// good (NotFound, NotOwned): the runner then ends and removes its registration.
func (a *KubernetesActivities) StartWarmRunner(ctx context.Context, in workflows.StartWarmRunnerInput) (workflows.StartWarmRunnerOutput, error) {
	podIn := in.Pod
	if _, err := buildRunnerPod(podIn); err != nil {
		// Checked before any write, so a bad template leaves no copy of the credential behind.
		return workflows.StartWarmRunnerOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	uid, err := a.copyWarmSecret(ctx, in)
	if err != nil {
		return workflows.StartWarmRunnerOutput{}, err
	}
	podIn.SecretName, podIn.SecretUID = podIn.Name, uid
	pod, err := buildRunnerPod(podIn)
	if err != nil {
		return workflows.StartWarmRunnerOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	created, err := createRunnerPod(ctx, a.Client, podIn, pod)
	if err = a.settleWait(ctx, podIn, activityAttempt(ctx), err); err != nil {
		return workflows.StartWarmRunnerOutput{}, err
	}
	return workflows.StartWarmRunnerOutput{SecretName: podIn.Name, SecretUID: uid, Pod: created}, nil
}

// CopyWarmRunnerSecret writes the runner's own Secret in its namespace from its warm
// registration's, once the runner's pod (created before, naming that Secret) is scheduled: the
// credential reaches the runner's namespace only when the kubelet is about to read it. One
// write; a retry adopts the copy an earlier attempt wrote. A warm Secret that is gone, or that
// another workflow owns, fails for good (NotFound, NotOwned).
func (a *KubernetesActivities) CopyWarmRunnerSecret(ctx context.Context, in workflows.CopyWarmSecretInput) (workflows.CopyWarmSecretOutput, error) {
	if in.Secret.Namespace == "" || in.Secret.Name == "" || in.WorkflowID == "" || in.Warm.Name == "" {
		return workflows.CopyWarmSecretOutput{}, temporal.NewNonRetryableApplicationError(
			"copy warm secret: the runner's secret, its workflow id and the warm secret are required", workflows.ErrInvalidSpec, nil)
	}
	uid, err := a.copyWarmSecret(ctx, workflows.StartWarmRunnerInput{
		Pod:  workflows.CreateRunnerPodInput{Pool: in.Pool, Name: in.Secret.Name, WorkflowID: in.WorkflowID, Namespace: in.Secret.Namespace},
		Warm: in.Warm,
	})
	if err != nil {
		return workflows.CopyWarmSecretOutput{}, err
	}
	return workflows.CopyWarmSecretOutput{SecretName: in.Secret.Name, SecretUID: uid}, nil
}

// copyWarmSecret returns the UID of the runner's own Secret, writing it from the warm one
// unless an earlier attempt did.
func (a *KubernetesActivities) copyWarmSecret(ctx context.Context, in workflows.StartWarmRunnerInput) (string, error) {
	p := in.Pod
	// Only a retry can find its own copy: the first attempt spares the read (a warm burst starts
	// hundreds of runners under the client's QPS limit), and a Secret made meanwhile is adopted
	// by applyRunnerSecret's AlreadyExists path.
	if activityAttempt(ctx) > 1 {
		own, err := ownedSecret(ctx, a.Client, p.Namespace, p.Name, p.WorkflowID)
		if err != nil {
			return "", err
		}
		if own != nil {
			return string(own.UID), nil
		}
	}
	warm, err := a.warmSecret(ctx, in.Warm.Namespace, in.Warm.Name, p.WorkflowID)
	if err != nil {
		return "", err
	}
	if owner := warm.Annotations[runnerpod.AnnotationWorkflowID]; owner != p.WorkflowID {
		return "", notOwned("warm secret", in.Warm.Namespace, in.Warm.Name, owner)
	}
	cfg := warm.Data[runnerpod.SecretKeyJITConfig]
	if len(cfg) == 0 {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"warm secret %s/%s holds no JIT configuration", in.Warm.Namespace, in.Warm.Name), workflows.ErrNotFound, nil)
	}
	id, _ := strconv.ParseInt(warm.Annotations[runnerpod.AnnotationRunnerID], 10, 64)
	return applyRunnerSecret(ctx, a.Client, nil, runnerSecret{
		namespace: p.Namespace, name: p.Name, pool: p.Pool, workflowID: p.WorkflowID,
		runnerID: id, key: runnerpod.SecretKeyJITConfig, value: string(cfg),
	})
}

// warmSecret reads a warm Secret from the worker's cache of the warm namespace
// (WarmSecrets) when the cache holds it whole and owned by the runner, else from the API
// server: one Secret minted moments ago may not have reached the cache yet, and an answer the
// cache cannot give (another owner, no credential) is the API server's to confirm. The cached
// object is shared: it is only read.
func (a *KubernetesActivities) warmSecret(ctx context.Context, namespace, name, workflowID string) (*corev1.Secret, error) {
	if a.WarmSecrets != nil {
		cached, err := a.WarmSecrets.Secrets(namespace).Get(name)
		if err == nil && cached.Annotations[runnerpod.AnnotationWorkflowID] == workflowID && len(cached.Data[runnerpod.SecretKeyJITConfig]) > 0 {
			return cached, nil
		}
	}
	warm, err := a.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, classifyKubernetesError(fmt.Sprintf("get warm secret %s/%s", namespace, name), err)
	}
	return warm, nil
}

// DeleteWarmSecrets deletes the named warm Secrets of one pool in one request: a
// DeleteCollection whose label selector names them (runnerflow's label, the pool's, and the
// runner names), so it can only ever remove runnerflow's Secrets of that pool. Names already
// gone are no error.
func (a *KubernetesActivities) DeleteWarmSecrets(ctx context.Context, in workflows.DeleteWarmSecretsInput) (workflows.Nothing, error) {
	if in.Namespace == "" || in.Pool == "" || len(in.Names) == 0 {
		return workflows.Nothing{}, temporal.NewNonRetryableApplicationError(
			"delete warm secrets: namespace, pool and at least one name are required", workflows.ErrInvalidSpec, nil)
	}
	selector, err := warmSecretsSelector(in.Pool, in.Names)
	if err != nil {
		return workflows.Nothing{}, temporal.NewNonRetryableApplicationError("delete warm secrets: "+err.Error(), workflows.ErrInvalidSpec, nil)
	}
	background := metav1.DeletePropagationBackground
	err = a.Client.CoreV1().Secrets(in.Namespace).DeleteCollection(ctx,
		metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{LabelSelector: selector})
	if apierrors.IsNotFound(err) {
		return workflows.Nothing{}, nil
	}
	return workflows.Nothing{}, classifyKubernetesError(fmt.Sprintf("delete %d warm secrets in %s", len(in.Names), in.Namespace), err)
}

// warmSecretsSelector selects runnerflow's Secrets of pool whose runner label is one of names.
func warmSecretsSelector(pool string, names []string) (string, error) {
	sel := labels.NewSelector()
	for _, req := range []struct {
		key    string
		op     selection.Operator
		values []string
	}{
		{runnerpod.LabelManagedBy, selection.Equals, []string{runnerpod.ManagedByValue}},
		{runnerpod.LabelPool, selection.Equals, []string{pool}},
		{runnerpod.LabelRunner, selection.In, names},
	} {
		r, err := labels.NewRequirement(req.key, req.op, req.values)
		if err != nil {
			return "", err
		}
		sel = sel.Add(*r)
	}
	return sel.String(), nil
}
