package framework

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeReadyCondition returns node's Ready condition, or nil when it has
// none (a Node registered without a kubelet, before the node lifecycle
// controller has looked at it).
func NodeReadyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// WaitNodeReadyStatus waits until the Ready condition of Node name has one
// of the statuses want, and returns the Node as it was then. The error for a
// timeout says which condition was seen last.
func (e *Env) WaitNodeReadyStatus(ctx context.Context, name string, timeout time.Duration, want ...corev1.ConditionStatus) (*corev1.Node, error) {
	var node *corev1.Node
	err := Eventually(ctx, timeout, fmt.Sprintf("Node %s Ready to be %v", name, want), func(ctx context.Context) (bool, string, error) {
		got, err := e.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := NodeReadyCondition(got)
		if ready == nil {
			return false, "no Ready condition", nil
		}
		node = got
		return slices.Contains(want, ready.Status), fmt.Sprintf("Ready %s (%s: %s)", ready.Status, ready.Reason, ready.Message), nil
	})
	if err != nil {
		return nil, err
	}
	return node, nil
}

// WaitNodeReady waits until Node name is Ready.
func (e *Env) WaitNodeReady(ctx context.Context, name string, timeout time.Duration) (*corev1.Node, error) {
	return e.WaitNodeReadyStatus(ctx, name, timeout, corev1.ConditionTrue)
}

// WaitNodeNotReady waits until Node name's Ready condition is False or
// Unknown: for a stopped kubelet, what the node lifecycle controller of
// Options.ControllerManager reports once controlplane.NodeMonitorGracePeriod
// has passed without a Lease renewal.
func (e *Env) WaitNodeNotReady(ctx context.Context, name string, timeout time.Duration) (*corev1.Node, error) {
	return e.WaitNodeReadyStatus(ctx, name, timeout, corev1.ConditionFalse, corev1.ConditionUnknown)
}

// Systemctl runs a unit command on a real kubelet's unit, as
// `systemctl COMMAND kubelet` on a node: "stop" stops the kubelet and keeps
// it stopped (no Restart=always) until "start"; "restart" and "status" as
// systemd's. The unit itself and the container runtime keep running. It
// returns the unit's answer, e.g. "inactive" or "active PID".
func (n *Node) Systemctl(ctx context.Context, command string) (string, error) {
	k, ok := n.kubelet.(*realKubelet)
	if !ok {
		return "", fmt.Errorf("node %s runs the stub, which has no unit", n.Name)
	}
	if !slices.Contains([]string{"stop", "start", "restart", "status"}, command) {
		return "", fmt.Errorf("node %s: unit command %q: want stop, start, restart or status", n.Name, command)
	}
	out, err := k.ctl(ctx, command)
	if err != nil {
		return "", fmt.Errorf("node %s: %w", n.Name, err)
	}
	return out, nil
}
