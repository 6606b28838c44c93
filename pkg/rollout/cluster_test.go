package rollout

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The cluster the tests build: Nodes as the agents would leave them, and
// rollouts as the apiserver would default them.

const rolloutName = "pool-blue"

var (
	v3  = contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "pool-blue-v3", UID: "uid-v3", ResourceVersion: "30"}
	v3b = contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "pool-blue-v3", UID: "uid-v3", ResourceVersion: "31"}
	v2  = contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "pool-blue-v2", UID: "uid-v2", ResourceVersion: "20"}
	v4  = contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "pool-blue-v4", UID: "uid-v4", ResourceVersion: "40"}
)

var now = metav1.Unix(1_800_000_000, 0)

type rolloutOpt func(*v1alpha1.KubeletConfigRollout)

func newRollout(opts ...rolloutOpt) *v1alpha1.KubeletConfigRollout {
	r := &v1alpha1.KubeletConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: rolloutName, Generation: 1},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector:   metav1.LabelSelector{MatchLabels: map[string]string{"pool": "blue"}},
			ConfigMapRef:   contract.ConfigMapRef{Namespace: v3.Namespace, Name: v3.Name},
			Canary:         ptr.To[int32](1),
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			OnFailure:      v1alpha1.FailureRevert,
		},
	}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

func canary(n int32) rolloutOpt { return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.Canary = &n } }

func maxUnavailable(v intstr.IntOrString) rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.MaxUnavailable = &v }
}

func paused() rolloutOpt { return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.Paused = true } }

func halt() rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.OnFailure = v1alpha1.FailureHalt }
}

func targeting(t contract.ConfigMapVersion) rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) {
		r.Spec.ConfigMapRef = contract.ConfigMapRef{Namespace: t.Namespace, Name: t.Name}
	}
}

// failedFor is a status written after the rollout failed for target.
func failedFor(target contract.ConfigMapVersion, node string) rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) {
		r.Status.Target = &target
		r.Status.Conditions = []metav1.Condition{{
			Type: v1alpha1.ConditionFailed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonTrialFailed,
			Message: "Node " + node + ": TrialFailed: kubelet unhealthy", LastTransitionTime: metav1.Unix(1_700_000_000, 0),
		}}
	}
}

// statusFor is a status written while rolling target out.
func statusFor(target contract.ConfigMapVersion) rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) { r.Status.Target = &target }
}

type nodeOpt func(*corev1.Node)

// newNode is a Ready Node on its local configuration, as its agent reports.
func newNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Annotations: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
	reports(n, contract.ConfigStatus{}, corev1.ConditionTrue, contract.ReasonLocalConfig, "local")
	for _, opt := range opts {
		opt(n)
	}
	return n
}

func reports(n *corev1.Node, st contract.ConfigStatus, condStatus corev1.ConditionStatus, reason, message string) {
	raw, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	n.Annotations[contract.ConfigStatusAnnotation] = string(raw)
	conds := n.Status.Conditions[:0]
	for _, c := range n.Status.Conditions {
		if c.Type != contract.ConditionKubeletConfigReady {
			conds = append(conds, c)
		}
	}
	n.Status.Conditions = append(conds, corev1.NodeCondition{
		Type: contract.ConditionKubeletConfigReady, Status: condStatus, Reason: reason, Message: message})
}

func notReady(n *corev1.Node) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
}

func noAgent(n *corev1.Node) {
	delete(n.Annotations, contract.ConfigStatusAnnotation)
	var conds []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type != contract.ConditionKubeletConfigReady {
			conds = append(conds, c)
		}
	}
	n.Status.Conditions = conds
}

func source(ref contract.ConfigMapVersion) string { return ref.Namespace + "/" + ref.Name }

// on: the Node is assigned ref and its agent runs it, through its trial.
func on(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Active: &ref, LastKnownGood: &ref}, corev1.ConditionTrue, contract.ReasonConfigActive, "active")
	}
}

// trying: the Node is assigned ref and its agent has it on trial.
func trying(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Active: &ref}, corev1.ConditionFalse, contract.ReasonTrialInProgress, "on trial")
	}
}

// assignedOnly: the Node is assigned ref and its agent has not reacted.
func assignedOnly(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) { n.Annotations[contract.ConfigSourceAnnotation] = source(ref) }
}

// rolledBack: ref failed its trial on the Node; the agent went back to
// its local configuration.
func rolledBack(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Error: "kubelet unhealthy"}, corev1.ConditionFalse, contract.ReasonRolledBack, "kubelet unhealthy")
	}
}

// invalid: the agent refused ref without applying it.
func invalid(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Error: "bad field"}, corev1.ConditionFalse, contract.ReasonValidationFailed, "bad field")
	}
}

// movedFrom: this rollout set the Node's config-source; before, it was
// previous (nil: absent).
func movedFrom(previous *string) nodeOpt { return movedByFrom(rolloutName, previous) }

func movedByFrom(rollout string, previous *string) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.RolloutAnnotation] = rollout
		if previous != nil {
			n.Annotations[contract.PreviousConfigSourceAnnotation] = *previous
		}
	}
}

// node is a named Node with the other rollouts that select it.
type node struct {
	*corev1.Node
	others []string
}

func observe(t *testing.T, nodes []node) []NodeObservation {
	t.Helper()
	var out []NodeObservation
	for _, n := range nodes {
		obs, err := ObserveNode(n.Node, n.others)
		if err != nil {
			t.Fatalf("observing %s: %v", n.Name, err)
		}
		out = append(out, obs)
	}
	return out
}

func nodes(list ...*corev1.Node) []node {
	out := make([]node, len(list))
	for i, n := range list {
		out[i] = node{Node: n}
	}
	return out
}
