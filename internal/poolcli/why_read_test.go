package poolcli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodWaitingSaysThePodsOwnReason(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}
	pulling := corev1.ContainerStatus{Name: "runner", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}
	creating := corev1.ContainerStatus{Name: "runner", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	tests := []struct {
		name   string
		status corev1.PodStatus
		want   string
	}{
		{"unschedulable", corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}}, "Unschedulable: 0/3 nodes are available"},
		{"image pull failing", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{pulling}}, "container runner ImagePullBackOff: Back-off pulling image"},
		{"a container being created says nothing", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{creating}}, ""},
		{"nothing yet", corev1.PodStatus{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := podWaiting(&corev1.Pod{Status: tt.status})
			if got != tt.want || (tt.want == "" && strings.TrimSpace(got) != "") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
