package simulator

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ensureNode creates the simulated node if it is missing and makes it Ready and schedulable.
// Patches, not updates: other simulators (parallel tests share a cluster) touch the same node.
func (s *Simulator) ensureNode(ctx context.Context) error {
	nodes := s.cfg.Client.CoreV1().Nodes()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   s.cfg.NodeName,
		Labels: map[string]string{corev1.LabelHostname: s.cfg.NodeName, corev1.LabelOSStable: "linux"},
	}}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("simulator: create node %s: %w", s.cfg.NodeName, err)
	}
	status, err := json.Marshal(map[string]any{"status": readyNodeStatus()})
	if err != nil {
		return err
	}
	if _, err := nodes.PatchStatus(ctx, s.cfg.NodeName, status); err != nil {
		return fmt.Errorf("simulator: mark node %s Ready: %w", s.cfg.NodeName, err)
	}
	// The TaintNodesByCondition admission plugin taints every new node not-ready; no node
	// lifecycle controller runs here to lift it.
	if _, err := nodes.Patch(ctx, s.cfg.NodeName, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("simulator: untaint node %s: %w", s.cfg.NodeName, err)
	}
	return nil
}

func readyNodeStatus() corev1.NodeStatus {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "runnerflow simulator is playing the kubelet", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: simulatedHostIP}},
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.34.4-runnerflow-sim",
			ContainerRuntimeVersion: "sim://1",
		},
	}
}
