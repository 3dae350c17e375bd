package simulator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// simulatedHostIP is the node's address in pod and node status.
const simulatedHostIP = "127.0.0.1"

// errPodReplaced: the pod was deleted and another one created under the same name.
var errPodReplaced = errors.New("pod was replaced by another with the same name")

// termination is how a pod ends.
type termination struct {
	phase    corev1.PodPhase // Succeeded or Failed
	exitCode int32           // of the runner container
	reason   string          // pod-level reason, e.g. Evicted
	message  string
	evicted  bool // adds the DisruptionTarget condition the kubelet sets on eviction
}

// evicted is the end of a pod the kubelet evicted under memory pressure; its containers are
// killed (exit code 137).
func evicted() *termination {
	return &termination{
		phase: corev1.PodFailed, exitCode: 137, reason: "Evicted", evicted: true,
		message: "The node was low on resource: memory. (simulated eviction)",
	}
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// bind assigns an unscheduled pod to the simulated node through pods/binding, as the
// scheduler does. A pod already assigned (by an earlier run of the simulator, or by a
// nodeName in its spec) is left where it is.
func (s *Simulator) bind(ctx context.Context, ref podRef, nodeName string) error {
	if nodeName != "" {
		return nil
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, UID: ref.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: s.cfg.NodeName},
	}
	err := s.cfg.Client.CoreV1().Pods(ref.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if apierrors.IsConflict(err) {
		// "pod ... is already assigned to node ...": bound since the informer saw it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("bind %s to %s: %w", ref, s.cfg.NodeName, err)
	}
	s.count(func(st *Stats) { st.PodsBound++ })
	return nil
}

// updateStatus applies mutate to a fresh copy of the pod and writes it through the status
// subresource, retrying on conflicts. mutate returns false when there is nothing to change.
func (s *Simulator) updateStatus(ctx context.Context, ref podRef, mutate func(*corev1.Pod) bool) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pods := s.cfg.Client.CoreV1().Pods(ref.Namespace)
		pod, err := pods.Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID != ref.UID {
			return errPodReplaced
		}
		if changed = mutate(pod); !changed {
			return nil
		}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("update status of %s: %w", ref, err)
	}
	return changed, nil
}

// markRunning sets the pod Running with every container started and ready.
func (s *Simulator) markRunning(ctx context.Context, ref podRef) error {
	changed, err := s.updateStatus(ctx, ref, func(pod *corev1.Pod) bool {
		if pod.Status.Phase == corev1.PodRunning || isTerminal(pod) {
			return false
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Reason, pod.Status.Message = "", ""
		pod.Status.HostIP = simulatedHostIP
		pod.Status.HostIPs = []corev1.HostIP{{IP: simulatedHostIP}}
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = &now
		}
		for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setCondition(pod, c, corev1.ConditionTrue, "", now)
		}
		pod.Status.ContainerStatuses = containerStatuses(pod, func(corev1.Container) corev1.ContainerState {
			return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		}, true)
		return true
	})
	if changed {
		s.count(func(st *Stats) { st.PodsStarted++ })
	}
	return err
}

// markUnschedulable shows the pod Pending with PodScheduled False, as the scheduler leaves a
// pod no node has room for.
func (s *Simulator) markUnschedulable(ctx context.Context, ref podRef) error {
	_, err := s.updateStatus(ctx, ref, func(pod *corev1.Pod) bool {
		if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
			return false
		}
		pod.Status.Phase = corev1.PodPending
		setCondition(pod, corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonUnschedulable, metav1.Now())
		return true
	})
	return err
}

// markWaiting shows the containers waiting for a reason (e.g. a missing Secret) while the pod
// stays Pending.
func (s *Simulator) markWaiting(ctx context.Context, ref podRef, reason, message string) error {
	_, err := s.updateStatus(ctx, ref, func(pod *corev1.Pod) bool {
		if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
			return false
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == reason && w.Message == message {
				return false
			}
		}
		pod.Status.ContainerStatuses = containerStatuses(pod, func(corev1.Container) corev1.ContainerState {
			return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
		}, false)
		return true
	})
	return err
}

// terminate moves the pod to its final phase with every container terminated.
func (s *Simulator) terminate(ctx context.Context, ref podRef, end termination) error {
	changed, err := s.updateStatus(ctx, ref, func(pod *corev1.Pod) bool {
		if isTerminal(pod) {
			return false
		}
		applyTermination(pod, end, metav1.Now())
		return true
	})
	if changed {
		s.count(func(st *Stats) {
			switch {
			case end.phase == corev1.PodSucceeded:
				st.PodsSucceeded++
			case end.evicted:
				st.PodsEvicted++
				st.PodsFailed++
			default:
				st.PodsFailed++
			}
		})
	}
	return err
}

func applyTermination(pod *corev1.Pod, end termination, now metav1.Time) {
	pod.Status.Phase = end.phase
	pod.Status.Reason, pod.Status.Message = end.reason, end.message
	reason := "Completed"
	if end.exitCode != 0 {
		reason = "Error"
	}
	started := now
	if pod.Status.StartTime != nil {
		started = *pod.Status.StartTime
	}
	pod.Status.ContainerStatuses = containerStatuses(pod, func(corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: end.exitCode, Reason: reason, Message: end.message, StartedAt: started, FinishedAt: now,
		}}
	}, false)
	readyReason := "PodCompleted"
	if end.phase == corev1.PodFailed {
		readyReason = "PodFailed"
	}
	setCondition(pod, corev1.ContainersReady, corev1.ConditionFalse, readyReason, now)
	setCondition(pod, corev1.PodReady, corev1.ConditionFalse, readyReason, now)
	if end.evicted {
		setCondition(pod, corev1.DisruptionTarget, corev1.ConditionTrue, "TerminationByKubelet", now)
	}
}

// containerStatuses builds a status for every container of the spec in the given state.
func containerStatuses(pod *corev1.Pod, state func(corev1.Container) corev1.ContainerState, ready bool) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		st := state(c)
		started := st.Running != nil
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sim://" + c.Image,
			State: st, Ready: ready, Started: &started,
		}
		if st.Waiting == nil {
			cs.ContainerID = "sim://" + string(pod.UID) + "/" + c.Name
		}
		out = append(out, cs)
	}
	return out
}

// setCondition sets or replaces one pod condition, keeping its transition time when the
// status does not change.
func setCondition(pod *corev1.Pod, typ corev1.PodConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason = status, reason
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: typ, Status: status, Reason: reason, LastTransitionTime: now,
	})
}

// finishDelete removes a pod whose deletion was requested, as the kubelet does once its
// containers have stopped: a grace-period-0 delete with a UID precondition, so a pod recreated
// under the same name is never hit.
//
// Like the kubelet, it tries again until the API server takes the delete (or the simulator
// stops), so an outage never leaves a pod terminating for ever.
func (s *Simulator) finishDelete(ctx context.Context, ref podRef) {
	zero := int64(0)
	for {
		err := s.cfg.Client.CoreV1().Pods(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &ref.UID},
		})
		switch {
		case err == nil:
			s.count(func(st *Stats) { st.DeletesFinished++ })
			s.log.Info("pod deletion finished", "pod", ref.String())
			return
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return // already gone, or the name now belongs to another pod (the precondition failed)
		case ctx.Err() != nil:
			return
		}
		s.log.Warn("could not finish the pod's deletion, retrying", "pod", ref.String(), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryDelay):
		}
	}
}
