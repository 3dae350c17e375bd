package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// KubernetesActivities are the runner lifecycle's Kubernetes activities, on workflows.TaskQueue.
type KubernetesActivities struct {
	Client kubernetes.Interface
	// Temporal, when set, is how CreateRunnerPod tells a runner's pool that the namespace has no
	// room for the pod (SignalRunnerBlocked) and, later, that the pod exists.
	Temporal WorkflowSignaler
	// WarmSecrets, when set, is the worker's cache of the warm namespace's Secrets: a warm
	// runner's start reads its warm Secret there instead of asking the API server, so a warm
	// burst spends the client's rate limit on writes only. Nil: every read asks the server.
	WarmSecrets corelisters.SecretLister
}

// Register registers the activities under their workflows.Activity* names.
func (a *KubernetesActivities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.CreateRunnerPod, activity.RegisterOptions{Name: workflows.ActivityCreateRunnerPod})
	r.RegisterActivityWithOptions(a.SetRunnerSecretOwner, activity.RegisterOptions{Name: workflows.ActivitySetSecretOwner})
	r.RegisterActivityWithOptions(a.GetRunnerPod, activity.RegisterOptions{Name: workflows.ActivityGetRunnerPod})
	r.RegisterActivityWithOptions(a.DeleteRunnerPod, activity.RegisterOptions{Name: workflows.ActivityDeleteRunnerPod})
	r.RegisterActivityWithOptions(a.DeleteRunnerSecret, activity.RegisterOptions{Name: workflows.ActivityDeleteRunnerSecret})
	r.RegisterActivityWithOptions(a.ListRunnerObjects, activity.RegisterOptions{Name: workflows.ActivityListRunnerObjects})
	r.RegisterActivityWithOptions(a.StartWarmRunner, activity.RegisterOptions{Name: workflows.ActivityStartWarmRunner})
	r.RegisterActivityWithOptions(a.DeleteWarmSecrets, activity.RegisterOptions{Name: workflows.ActivityDeleteWarmSecrets})
	r.RegisterActivityWithOptions(a.CopyWarmRunnerSecret, activity.RegisterOptions{Name: workflows.ActivityCopyWarmSecret})
}

// CreateRunnerPod creates the runner's pod, or adopts the one a previous attempt of this
// workflow created. A pod of that name owned by anything else is refused (NotOwned); our own
// pod still terminating (the previous registration attempt's) is waited for by retrying.
//
// A pod the namespace's ResourceQuota has no room for is retried (QuotaExceeded, at
// workflows.QuotaRetryDelay), and the runner's pool is told of the wait and of its end
// (reportBlock): the runner workflow itself sees nothing while its activity retries.
func (a *KubernetesActivities) CreateRunnerPod(ctx context.Context, in workflows.CreateRunnerPodInput) (workflows.CreateRunnerPodOutput, error) {
	pod, err := buildRunnerPod(in)
	if err != nil {
		return workflows.CreateRunnerPodOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	out, err := createRunnerPod(ctx, a.Client, in, pod)
	return out, a.settleWait(ctx, in, activityAttempt(ctx), err)
}

// settleWait paces a quota refusal of attempt (QuotaRetryDelay) and tells the pool of the wait
// (on the attempts QuotaReportAttempt names), or, once an attempt after the first succeeds, that
// the pod exists. It returns the error the attempt ends with.
func (a *KubernetesActivities) settleWait(ctx context.Context, in workflows.CreateRunnerPodInput, attempt int, err error) error {
	quota, full := quotaRefusal(err)
	switch {
	case full:
		if workflows.QuotaReportAttempt(attempt) {
			a.reportBlock(ctx, in, workflows.RunnerBlockReport{Blocked: true, Reason: workflows.BlockQuota, Message: quota.Message()})
		}
		return temporal.NewApplicationErrorWithOptions(quota.Message(), workflows.ErrQuotaExceeded, temporal.ApplicationErrorOptions{
			NextRetryDelay: workflows.QuotaRetryDelay(attempt), Category: temporal.ApplicationErrorCategoryBenign,
		})
	case err == nil && attempt > 1:
		// An earlier attempt failed, maybe for quota: the pool forgets a wait it may have heard of
		// (one it never heard of changes nothing).
		a.reportBlock(ctx, in, workflows.RunnerBlockReport{})
	}
	return err
}

// reportBlock tells the runner's pool (SignalRunnerBlocked) that its pod waits for room, or no
// longer does. It is a report, not the activity's effect: a failure is logged, never returned
// (the pool also clears a wait when the runner reports idle or busy).
func (a *KubernetesActivities) reportBlock(ctx context.Context, in workflows.CreateRunnerPodInput, rep workflows.RunnerBlockReport) {
	if a.Temporal == nil || in.Pool == "" {
		return
	}
	rep.Runner = in.Name
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	err := a.Temporal.SignalWorkflow(ctx, workflows.PoolWorkflowID(in.Pool), "", workflows.SignalRunnerBlocked, rep)
	var gone *serviceerror.NotFound
	if err != nil && !errors.As(err, &gone) && activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("Cannot tell the pool about the runner's pod", "pool", in.Pool, "runner", in.Name, "error", err)
	}
}

// reportTimeout bounds a report to the pool, so a slow Temporal never holds up the pod.
const reportTimeout = 5 * time.Second

// activityAttempt is the attempt of the running activity, counting from 1 (1 outside one).
func activityAttempt(ctx context.Context) int {
	if !activity.IsActivity(ctx) {
		return 1
	}
	return int(activity.GetInfo(ctx).Attempt)
}

// quotaRefusal returns the classified error when it is a quota refusal.
func quotaRefusal(err error) (*temporal.ApplicationError, bool) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == workflows.ErrQuotaExceeded {
		return app, true
	}
	return nil, false
}

// createRunnerPod creates the built pod or adopts our own (see CreateRunnerPod); RegisterRunner
// uses it too when it creates the pod after the registration.
func createRunnerPod(ctx context.Context, client kubernetes.Interface, in workflows.CreateRunnerPodInput, pod *corev1.Pod) (workflows.CreateRunnerPodOutput, error) {
	pods := client.CoreV1().Pods(in.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		return workflows.CreateRunnerPodOutput{UID: string(created.UID), CreatedAt: time.Now()}, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return workflows.CreateRunnerPodOutput{}, classifyKubernetesError("create pod "+in.Namespace+"/"+in.Name, err)
	}
	existing, err := pods.Get(ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		return workflows.CreateRunnerPodOutput{}, classifyKubernetesError("get existing pod "+in.Namespace+"/"+in.Name, err)
	}
	if owner := existing.Annotations[runnerpod.AnnotationWorkflowID]; owner != in.WorkflowID {
		return workflows.CreateRunnerPodOutput{}, notOwned("pod", in.Namespace, in.Name, owner)
	}
	if existing.DeletionTimestamp != nil {
		return workflows.CreateRunnerPodOutput{}, temporal.NewApplicationError(
			fmt.Sprintf("pod %s/%s of an earlier attempt is still terminating", in.Namespace, in.Name), workflows.ErrTransient)
	}
	return workflows.CreateRunnerPodOutput{UID: string(existing.UID), Adopted: true, CreatedAt: existing.CreationTimestamp.Time}, nil
}

// SetRunnerSecretOwner makes the pod the Secret's owner, so a cluster's garbage collector
// removes the Secret with the pod even if the workflow never gets to delete it. One merge
// patch, the same every time: idempotent.
func (a *KubernetesActivities) SetRunnerSecretOwner(ctx context.Context, in workflows.SetSecretOwnerInput) (workflows.Nothing, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Pod", Name: in.PodName, UID: types.UID(in.PodUID),
	}}}})
	if err != nil {
		return workflows.Nothing{}, err
	}
	_, err = a.Client.CoreV1().Secrets(in.Namespace).Patch(ctx, in.SecretName, types.MergePatchType, patch, metav1.PatchOptions{})
	return workflows.Nothing{}, classifyKubernetesError("set owner of secret "+in.Namespace+"/"+in.SecretName, err)
}

// GetRunnerPod reads the pod's phase; a missing pod, or one with another UID, does not exist.
func (a *KubernetesActivities) GetRunnerPod(ctx context.Context, in workflows.PodRef) (workflows.GetRunnerPodOutput, error) {
	pod, err := a.Client.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return workflows.GetRunnerPodOutput{}, nil
	case err != nil:
		return workflows.GetRunnerPodOutput{}, classifyKubernetesError("get pod "+in.Namespace+"/"+in.Name, err)
	case in.UID != "" && string(pod.UID) != in.UID:
		return workflows.GetRunnerPodOutput{}, nil
	}
	return workflows.GetRunnerPodOutput{
		Exists: true, Phase: workflows.PodPhase(pod.Status.Phase), Reason: pod.Status.Reason,
		Deleting: pod.DeletionTimestamp != nil, Scheduled: pod.Spec.NodeName != "",
	}, nil
}

// DeleteRunnerPod deletes the pod. NotFound is success, and so is a UID precondition failure:
// the pod with our UID is gone and the name belongs to another pod now.
func (a *KubernetesActivities) DeleteRunnerPod(ctx context.Context, in workflows.PodRef) (workflows.Nothing, error) {
	opts := metav1.DeleteOptions{}
	if in.UID != "" {
		opts.Preconditions = metav1.NewUIDPreconditions(in.UID)
	}
	err := a.Client.CoreV1().Pods(in.Namespace).Delete(ctx, in.Name, opts)
	if apierrors.IsNotFound(err) || (in.UID != "" && apierrors.IsConflict(err)) {
		return workflows.Nothing{}, nil
	}
	return workflows.Nothing{}, classifyKubernetesError("delete pod "+in.Namespace+"/"+in.Name, err)
}

// DeleteRunnerSecret deletes the runner's Secret; NotFound is success (the garbage collector may
// have removed it with the pod). A pod the Secret owns goes with it: the cluster's garbage
// collector deletes it in the background, so ending a runner is one write.
func (a *KubernetesActivities) DeleteRunnerSecret(ctx context.Context, in workflows.SecretRef) (workflows.Nothing, error) {
	background := metav1.DeletePropagationBackground
	err := a.Client.CoreV1().Secrets(in.Namespace).Delete(ctx, in.Name, metav1.DeleteOptions{PropagationPolicy: &background})
	if apierrors.IsNotFound(err) {
		return workflows.Nothing{}, nil
	}
	return workflows.Nothing{}, classifyKubernetesError("delete secret "+in.Namespace+"/"+in.Name, err)
}

// runnerSecret is the Secret a registration writes: one credential under one key.
type runnerSecret struct {
	namespace, name, pool, workflowID string
	// runnerID is annotated in JIT mode, so a retried registration can adopt it.
	runnerID   int64
	key, value string
}

// ownedSecret returns the runner's existing Secret (nil if none), refusing one that another
// workflow owns.
func ownedSecret(ctx context.Context, client kubernetes.Interface, namespace, name, workflowID string) (*corev1.Secret, error) {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, classifyKubernetesError("get secret "+namespace+"/"+name, err)
	}
	if owner := s.Annotations[runnerpod.AnnotationWorkflowID]; owner != workflowID {
		return nil, notOwned("secret", namespace, name, owner)
	}
	return s, nil
}

// applyRunnerSecret creates the Secret, or rewrites our existing one (a new credential after the
// old registration vanished, or a fresh registration token). It returns the Secret's UID: the
// runner's pod names the Secret as its owner.
func applyRunnerSecret(ctx context.Context, client kubernetes.Interface, existing *corev1.Secret, want runnerSecret) (string, error) {
	secrets := client.CoreV1().Secrets(want.namespace)
	if existing == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: want.name, Namespace: want.namespace},
			Type:       corev1.SecretTypeOpaque,
		}
		fillRunnerSecret(s, want)
		created, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if err == nil {
			return string(created.UID), nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", classifyKubernetesError("create secret "+want.namespace+"/"+want.name, err)
		}
		// Created meanwhile (a concurrent retry): check the owner and rewrite it.
		if existing, err = ownedSecret(ctx, client, want.namespace, want.name, want.workflowID); err != nil {
			return "", err
		}
	}
	s := existing.DeepCopy()
	fillRunnerSecret(s, want)
	updated, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return "", classifyKubernetesError("update secret "+want.namespace+"/"+want.name, err)
	}
	return string(updated.UID), nil
}

func fillRunnerSecret(s *corev1.Secret, want runnerSecret) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Labels[runnerpod.LabelManagedBy] = runnerpod.ManagedByValue
	s.Labels[runnerpod.LabelPool] = want.pool
	s.Labels[runnerpod.LabelRunner] = want.name
	s.Annotations[runnerpod.AnnotationWorkflowID] = want.workflowID
	delete(s.Annotations, runnerpod.AnnotationRunnerID)
	if want.runnerID != 0 {
		s.Annotations[runnerpod.AnnotationRunnerID] = strconv.FormatInt(want.runnerID, 10)
	}
	s.Data = map[string][]byte{want.key: []byte(want.value)}
}

func notOwned(kind, namespace, name, owner string) error {
	if owner == "" {
		owner = "no runnerflow workflow"
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"%s %s/%s exists and belongs to %s; it is left alone", kind, namespace, name, owner), workflows.ErrNotOwned, nil)
}

// classifyKubernetesError is the one place API-server errors become Temporal application
// errors. what names the call. API-server messages name objects and fields, not Secret data.
func classifyKubernetesError(what string, err error) error {
	if err == nil {
		return nil
	}
	msg := what + ": " + err.Error()
	switch {
	case apierrors.IsNotFound(err):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrNotFound, nil)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrInvalidSpec, nil)
	case apierrors.IsForbidden(err):
		return classifyForbidden(msg, err)
	case apierrors.IsUnauthorized(err):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrForbidden, nil)
	case apierrors.IsTooManyRequests(err):
		delay := time.Second
		if seconds, ok := apierrors.SuggestsClientDelay(err); ok && seconds > 0 {
			delay = time.Duration(seconds) * time.Second
		}
		return temporal.NewApplicationErrorWithOptions(msg, workflows.ErrRateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: delay, Category: temporal.ApplicationErrorCategoryBenign})
	}
	// Conflicts, AlreadyExists races, timeouts, 5xx and network errors: retry under the policy.
	return temporal.NewApplicationError(msg, workflows.ErrTransient)
}

// Refusals of the ResourceQuota admission plugin, as the API server words them (403 Forbidden,
// e.g. `pods "r-1" is forbidden: exceeded quota: runners, requested: pods=1, used: pods=5,
// limited: pods=5`). Kubernetes has no error type or status cause for them, so the message is
// what tells them apart, as Tekton and Argo Workflows tell them apart.
const (
	// quotaExceeded: the quota has no room; it clears as pods end or the quota is raised.
	quotaExceeded = "exceeded quota: "
	// quotaStatusUnknown: the quota controller has not counted a new or changed quota yet.
	quotaStatusUnknown = "status unknown for quota: "
	// quotaMustSpecify: the quota tracks requests or limits the pod does not set ("failed
	// quota: q: must specify limits.cpu"): only a new pod template helps.
	quotaMustSpecify = "failed quota: "
)

// classifyForbidden sorts the API server's 403s: a quota refusal that clears by itself is
// retried (see the policy's "Quota waits"); a pod the quota can never admit as written is an
// invalid spec; anything else (RBAC, a namespace being deleted, PodSecurity, an admission
// webhook's denial) fails fast, for an operator to act on.
func classifyForbidden(msg string, err error) error {
	text := err.Error()
	switch {
	case strings.Contains(text, quotaExceeded), strings.Contains(text, quotaStatusUnknown):
		return temporal.NewApplicationErrorWithOptions(msg, workflows.ErrQuotaExceeded, temporal.ApplicationErrorOptions{
			NextRetryDelay: workflows.QuotaRetryInitial, Category: temporal.ApplicationErrorCategoryBenign,
		})
	case strings.Contains(text, quotaMustSpecify):
		return temporal.NewNonRetryableApplicationError(msg+" (the pod template must set what the quota tracks)", workflows.ErrInvalidSpec, nil)
	case strings.Contains(text, " cannot "):
		// RBAC: `User "system:serviceaccount:runnerflow:runnerflow" cannot create resource "pods" ...`
		return temporal.NewNonRetryableApplicationError(msg+" (the worker's Kubernetes identity lacks this permission: see its Role)", workflows.ErrForbidden, nil)
	}
	return temporal.NewNonRetryableApplicationError(msg, workflows.ErrForbidden, nil)
}
