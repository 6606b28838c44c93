package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestDecidedAlike covers which Node updates wake the rollouts selecting
// the Node: a heartbeat must not, anything Decide reads must.
func TestDecidedAlike(t *testing.T) {
	base := func() *corev1.Node {
		n := readyNode("n1", map[string]string{"pool": "blue"})
		n.ResourceVersion = "10"
		n.Annotations = map[string]string{
			contract.ConfigSourceAnnotation: "kubelet-configs/v1",
			contract.ConfigStatusAnnotation: `{"assigned":{"namespace":"kubelet-configs","name":"v1","uid":"u1","resourceVersion":"3"}}`,
		}
		n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(100, 0))
		return n
	}
	cases := []struct {
		name   string
		change func(*corev1.Node)
		alike  bool
	}{
		{"heartbeat", func(n *corev1.Node) {
			n.ResourceVersion = "11"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(110, 0))
			n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
		}, true},
		{"unschedulable", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"label", func(n *corev1.Node) { n.Labels["pool"] = "green" }, false},
		{"label added", func(n *corev1.Node) { n.Labels["zone"] = "a" }, false},
		{"not ready", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }, false},
		{"agent's condition", func(n *corev1.Node) { n.Status.Conditions[1].Reason = "TrialInProgress" }, false},
		{"agent's status", func(n *corev1.Node) { n.Annotations[contract.ConfigStatusAnnotation] = `{}` }, false},
		{"agent's status unreadable", func(n *corev1.Node) { n.Annotations[contract.ConfigStatusAnnotation] = `{` }, false},
		{"assignment", func(n *corev1.Node) { n.Annotations[contract.ConfigSourceAnnotation] = "kubelet-configs/v2" }, false},
		{"rollout bookkeeping", func(n *corev1.Node) { n.Annotations[v1alpha1.RolloutAnnotation] = "r" }, false},
		{"previous source", func(n *corev1.Node) { n.Annotations[v1alpha1.PreviousConfigSourceAnnotation] = "" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, after := base(), base()
			tc.change(after)
			if got := decidedAlike(before, after); got != tc.alike {
				t.Errorf("decidedAlike = %v, want %v", got, tc.alike)
			}
		})
	}
}
