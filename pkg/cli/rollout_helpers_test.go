package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardfake "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/fake"
)

// The rollout tests' cluster: rollout pool-blue rolls kubelet-configs/v3
// out to pool=blue, as the controller and the agents would leave things.

// v3 is the target as the ConfigMap testTarget has it.
var v3 = &contract.ConfigMapVersion{Namespace: testNamespace, Name: "v3", UID: "uid-v3", ResourceVersion: "30"}

func testTarget() *corev1.ConfigMap {
	cm := testConfigMap("v3", goodConfig, true)
	cm.UID, cm.ResourceVersion = types.UID(v3.UID), v3.ResourceVersion
	return cm
}

type rolloutOpt func(*v1alpha1.KubeletConfigRollout)

func testRollout(name string, opts ...rolloutOpt) *v1alpha1.KubeletConfigRollout {
	r := &v1alpha1.KubeletConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "KubeletConfigRollout"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec: v1alpha1.KubeletConfigRolloutSpec{
			NodeSelector:   metav1.LabelSelector{MatchLabels: map[string]string{"pool": "blue"}},
			ConfigMapRef:   contract.ConfigMapRef{Namespace: testNamespace, Name: "v3"},
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

// rollingOut is the status the controller writes while rolling v3 out.
func rollingOut(r *v1alpha1.KubeletConfigRollout) {
	r.Status = v1alpha1.KubeletConfigRolloutStatus{ObservedGeneration: r.Generation, Target: v3, Selected: 3, Updated: 1, InTrial: 1}
	setConditions(r, "True/RollingOut/1 of 3 Nodes updated, 1 in trial", "False/RollingOut/1 of 3", "False/NoFailure/no Node has failed", "False/NotPaused/spec.paused is false")
}

func failedRollout(r *v1alpha1.KubeletConfigRollout) {
	r.Status = v1alpha1.KubeletConfigRolloutStatus{ObservedGeneration: r.Generation, Target: v3, Selected: 3, Updated: 1, Failed: 1}
	setConditions(r, "False/Reverting/failed; re-pointing 2 Nodes", "False/Reverting/1 of 3", "True/TrialFailed/Node node-b: TrialFailed: kubelet unhealthy", "False/NotPaused/spec.paused is false")
}

func completeRollout(r *v1alpha1.KubeletConfigRollout) {
	r.Status = v1alpha1.KubeletConfigRolloutStatus{ObservedGeneration: r.Generation, Target: v3, Selected: 3, Updated: 3}
	setConditions(r, "False/Complete/all 3 selected Nodes run v3", "True/AllNodesUpdated/all 3", "False/NoFailure/no Node has failed", "False/NotPaused/spec.paused is false")
}

func pausedSpec(r *v1alpha1.KubeletConfigRollout) { r.Spec.Paused = true }

// setConditions sets Progressing, Complete, Failed and Paused from
// "Status/Reason/Message".
func setConditions(r *v1alpha1.KubeletConfigRollout, specs ...string) {
	kinds := []string{v1alpha1.ConditionProgressing, v1alpha1.ConditionComplete, v1alpha1.ConditionFailed, v1alpha1.ConditionPaused}
	r.Status.Conditions = nil
	for i, spec := range specs {
		parts := strings.SplitN(spec, "/", 3)
		r.Status.Conditions = append(r.Status.Conditions, metav1.Condition{Type: kinds[i], Status: metav1.ConditionStatus(parts[0]),
			Reason: parts[1], Message: parts[2], LastTransitionTime: metav1.NewTime(testNow), ObservedGeneration: r.Generation})
	}
}

// newRollouts is the rollout clientset of the tests: the generated fake,
// holding rollouts.
func newRollouts(rollouts ...*v1alpha1.KubeletConfigRollout) *nodeguardfake.Clientset {
	objs := make([]runtime.Object, len(rollouts))
	for i, r := range rollouts {
		objs[i] = r
	}
	return nodeguardfake.NewSimpleClientset(objs...)
}

// rolloutNode is a Ready Node in pool blue, with annotations.
func rolloutNode(name string, annotations map[string]string) *corev1.Node {
	n := testNode(name, "v1.37.2", annotations)
	n.ResourceVersion = "5"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func reporting(t *testing.T, n *corev1.Node, st contract.ConfigStatus, cond corev1.ConditionStatus, reason string) *corev1.Node {
	n.Annotations[contract.ConfigStatusAnnotation] = reportedStatus(t, st)
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: cond, Reason: reason, Message: reason})
	return n
}

// movedBy is the bookkeeping of a Node the rollout moved to v3, from
// previous (nil: no config-source before).
func movedBy(rollout string, previous *string) map[string]string {
	a := map[string]string{contract.ConfigSourceAnnotation: testNamespace + "/v3", contract.RolloutAnnotation: rollout}
	if previous != nil {
		a[contract.PreviousConfigSourceAnnotation] = *previous
	}
	return a
}

var v2 = &contract.ConfigMapVersion{Namespace: testNamespace, Name: "v2", UID: "uid-v2", ResourceVersion: "20"}

// rolloutNodes: node-a updated (from v2), node-b on trial (from nothing),
// node-c not yet assigned, and node-z in another pool.
func rolloutNodes(t *testing.T) []runtime.Object {
	fromV2 := testNamespace + "/v2"
	return []runtime.Object{
		reporting(t, rolloutNode("node-a", movedBy("pool-blue", &fromV2)),
			contract.ConfigStatus{Assigned: v3, Active: v3, LastKnownGood: v3}, corev1.ConditionTrue, contract.ReasonConfigActive),
		reporting(t, rolloutNode("node-b", movedBy("pool-blue", nil)),
			contract.ConfigStatus{Assigned: v3, Active: v3, LastKnownGood: v2}, corev1.ConditionFalse, contract.ReasonTrialInProgress),
		reporting(t, rolloutNode("node-c", assigned(fromV2)),
			contract.ConfigStatus{Assigned: v2, Active: v2, LastKnownGood: v2}, corev1.ConditionTrue, contract.ReasonConfigActive),
		func() *corev1.Node {
			n := rolloutNode("node-z", nil)
			n.Labels = map[string]string{"pool": "green"}
			return n
		}(),
		testTarget(),
	}
}
