package poolcli

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PodReader reads why a runner's Pending pod waits: the scheduler's or a container's own
// reason ("Unschedulable: 0/3 nodes are available…", "ImagePullBackOff: …"), and when the pod
// was scheduled. An empty reason: nothing to say (or the pod could not be read).
type PodReader interface {
	PodWaiting(ctx context.Context, namespace, pod string) (reason string, scheduled time.Time)
}

// KubePods is the PodReader over a Kubernetes client: one GET of one pod.
type KubePods struct{ Client kubernetes.Interface }

// PodWaiting implements PodReader.
func (k KubePods) PodWaiting(ctx context.Context, namespace, name string) (string, time.Time) {
	pod, err := k.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}
	}
	return podWaiting(pod)
}

// podWaiting is the reason a Pending pod gives for itself: a container waiting with a reason
// (image pull failing, a bad config), else the scheduler's refusal.
func podWaiting(pod *corev1.Pod) (string, time.Time) {
	var scheduled time.Time
	reason := ""
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			scheduled = c.LastTransitionTime.Time
		} else if c.Reason != "" {
			reason = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return fmt.Sprintf("container %s %s: %s", cs.Name, w.Reason, w.Message), scheduled
		}
	}
	return reason, scheduled
}

// longestPending is the pending activity that was scheduled first, as `why` reports it.
func longestPending(acts []*workflowpb.PendingActivityInfo) *PendingActivity {
	var first *workflowpb.PendingActivityInfo
	for _, a := range acts {
		if first == nil || a.GetScheduledTime().AsTime().Before(first.GetScheduledTime().AsTime()) {
			first = a
		}
	}
	if first == nil {
		return nil
	}
	p := pendingActivity(first)
	return &p
}

// pendingActivity is one pending activity as `why` reports it.
func pendingActivity(a *workflowpb.PendingActivityInfo) PendingActivity {
	p := PendingActivity{
		Type:    a.GetActivityType().GetName(),
		Started: a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED,
		Attempt: a.GetAttempt(),
	}
	if t := a.GetScheduledTime(); t != nil {
		p.Scheduled = t.AsTime()
	}
	if t := a.GetNextAttemptScheduleTime(); t != nil {
		p.NextAttempt = t.AsTime()
	}
	if f := a.GetLastFailure(); f != nil {
		p.Failure = f.GetMessage()
		p.FailureType = f.GetApplicationFailureInfo().GetType()
		if f.GetTimeoutFailureInfo() != nil {
			p.FailureType = "Timeout"
			p.Failure = "timeout " + f.GetTimeoutFailureInfo().GetTimeoutType().String()
		}
	}
	return p
}
