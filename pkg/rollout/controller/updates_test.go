package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
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
		name string
		// from, when set, shapes both versions; change the later one.
		from, change func(*corev1.Node)
		alike        bool
	}{
		{name: "heartbeat", change: func(n *corev1.Node) {
			n.ResourceVersion = "11"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(110, 0))
			n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
		}, alike: true},
		{name: "unschedulable", change: func(n *corev1.Node) { n.Spec.Unschedulable = true }, alike: true},
		{name: "label", change: func(n *corev1.Node) { n.Labels["pool"] = "green" }},
		{name: "label added", change: func(n *corev1.Node) { n.Labels["zone"] = "a" }},
		{name: "not ready", change: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }},
		{name: "agent's condition", change: func(n *corev1.Node) { n.Status.Conditions[1].Reason = "TrialInProgress" }},
		{name: "agent's status", change: func(n *corev1.Node) { n.Annotations[contract.ConfigStatusAnnotation] = `{}` }},
		{name: "agent's status unreadable", change: func(n *corev1.Node) { n.Annotations[contract.ConfigStatusAnnotation] = `{` }},
		{name: "legacy configSource, no annotation", from: func(n *corev1.Node) { delete(n.Annotations, contract.ConfigSourceAnnotation) }, change: func(n *corev1.Node) {
			n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kubelet-configs", Name: "v0", KubeletConfigKey: "kubelet"}}
		}},
		{name: "assignment", change: func(n *corev1.Node) { n.Annotations[contract.ConfigSourceAnnotation] = "kubelet-configs/v2" }},
		{name: "rollout bookkeeping", change: func(n *corev1.Node) { n.Annotations[contract.RolloutAnnotation] = "r" }},
		{name: "the controller's trial-passed mark", change: func(n *corev1.Node) {
			n.Annotations[contract.TrialPassedAnnotation] = "kubelet-configs/v1@3"
		}, alike: true},
		{name: "previous source", change: func(n *corev1.Node) { n.Annotations[contract.PreviousConfigSourceAnnotation] = "" }},
		// The controller writes the mode; no decision reads it back.
		{name: "the drain mode", change: func(n *corev1.Node) { n.Annotations[contract.DrainAnnotation] = contract.DrainNever }, alike: true},
		// The agent's phase and the pods its drain waits on are in the
		// Nodes' verdicts (their detail, the Progressing message).
		{name: "agent's phase", change: func(n *corev1.Node) {
			n.Annotations[contract.ConfigStatusAnnotation] = `{"assigned":{"namespace":"kubelet-configs","name":"v1","uid":"u1","resourceVersion":"3"},"phase":"Draining"}`
		}},
		{name: "the pods a drain waits on", from: func(n *corev1.Node) {
			n.Annotations[contract.ConfigStatusAnnotation] = `{"assigned":{"namespace":"kubelet-configs","name":"v1","uid":"u1","resourceVersion":"3"},"phase":"Draining"}`
		}, change: func(n *corev1.Node) {
			n.Annotations[contract.ConfigStatusAnnotation] = `{"assigned":{"namespace":"kubelet-configs","name":"v1","uid":"u1","resourceVersion":"3"},"phase":"Draining","pendingPods":["default/web-0"]}`
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, after := base(), base()
			if tc.from != nil {
				tc.from(before)
				tc.from(after)
			}
			tc.change(after)
			obsBefore, _ := rollout.ObserveNode(before, nil)
			obsAfter, _ := rollout.ObserveNode(after, nil)
			if got := decidedAlike(before, after, obsBefore, obsAfter); got != tc.alike {
				t.Errorf("decidedAlike = %v, want %v", got, tc.alike)
			}
		})
	}
}
