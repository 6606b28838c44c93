package rollout

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

func drainMode(mode v1alpha1.DrainMode) rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.Drain = mode }
}

// inPhase: the Node is assigned ref and its agent is in phase on the way to
// it, from its local configuration, the drain waiting on pods.
func inPhase(ref contract.ConfigMapVersion, phase string, pods ...string) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Phase: phase, PendingPods: pods}, corev1.ConditionFalse, phase, strings.ToLower(phase))
	}
}

// drainTimedOut: the agent could not drain the Node for ref, uncordoned it
// and left ref unapplied, as its status and condition say.
func drainTimedOut(ref contract.ConfigMapVersion, message string, pods ...string) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Error: "the drain did not finish", PendingPods: pods},
			corev1.ConditionFalse, contract.ReasonDrainTimedOut, message)
	}
}

// A Node in a change's phases counts as unavailable and says where it
// stands; a drain that timed out on a Node in its trial fails the rollout
// naming the pods that blocked it.
func TestDrainingNodes(t *testing.T) {
	fromV2 := ptr.To(source(v2))
	const pdbMessage = "the drain did not finish within 10m0s: default/web-0 (PodDisruptionBudget web)"
	tests := []testCase{
		{name: "a Node draining for the target is in trial, unavailable, and names the pods", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2", inPhase(v3, contract.PhaseDraining, "default/web-0", "default/web-1"), movedFrom(nil)), newNode("n3")),
			want: want{assign: []string{}, states: map[string]NodeState{"n2": StateInTrial, "n3": StatePending},
				details:  map[string]string{"n2": "Draining, waiting on default/web-0, default/web-1", "n3": ""},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"1 unavailable (at most 1)", "waiting on n2 (Draining, waiting on default/web-0, default/web-1)"}},
				counts:   &[4]int32{3, 1, 1, 0}}},
		{name: "a drain waiting on no pod says its phase alone", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", inPhase(v3, contract.PhaseDraining), movedFrom(nil)), newNode("n2")),
			want:  want{assign: []string{}, states: map[string]NodeState{"n1": StateInTrial}, details: map[string]string{"n1": "Draining"}}},
		{name: "a Node restarting for the target is in trial", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", inPhase(v3, contract.PhaseRestarting), movedFrom(nil), notReady), newNode("n2")),
			want:  want{assign: []string{}, states: map[string]NodeState{"n1": StateInTrial}, details: map[string]string{"n1": "Restarting, not Ready"}}},
		{name: "pods listed outside a drain are not waited on", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", inPhase(v3, contract.PhaseTrialInProgress, "default/web-0"), movedFrom(nil)), newNode("n2")),
			want:  want{assign: []string{}, details: map[string]string{"n1": "TrialInProgress"}}},
		{name: "a Node draining for another configuration is Unavailable", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2", inPhase(v2, contract.PhaseDraining, "default/web-0")), newNode("n3")),
			want: want{assign: []string{"n3"}, states: map[string]NodeState{"n2": StateUnavailable},
				details: map[string]string{"n2": "Draining, waiting on default/web-0"}}},
		{name: "a phase the condition does not share yet is shown beside it", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", inPhase(v3, contract.PhaseDraining, "default/web-0"), movedFrom(nil), func(n *corev1.Node) {
				n.Status.Conditions[1].Reason = contract.ReasonTrialInProgress
			}), newNode("n2")),
			want: want{details: map[string]string{"n1": "Draining, waiting on default/web-0, KubeletConfigReady=False TrialInProgress"}}},

		{name: "a drain that timed out in the Node's trial fails the rollout", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", drainTimedOut(v3, pdbMessage, "default/web-0"), movedFrom(fromV2)), newNode("n2")),
			want: want{assign: []string{}, reverts: map[string]*string{"n1": fromV2}, states: map[string]NodeState{"n1": StateReverting, "n2": StateUntouched},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/DrainTimedOut", v1alpha1.ConditionProgressing: "False/Reverting"},
				messages:   map[string][]string{v1alpha1.ConditionFailed: {"Node n1: DrainTimedOut: " + pdbMessage}},
				counts:     &[4]int32{2, 0, 0, 1}}},
		{name: "the Failed message names the blocking pods the agent's message leaves out", rollout: newRollout(statusFor(v3), halt()),
			nodes: nodes(newNode("n1", drainTimedOut(v3, "the drain did not finish within 10m0s", "default/web-0", "kube-system/db-1"), movedFrom(nil)), newNode("n2")),
			want: want{reverts: map[string]*string{}, states: map[string]NodeState{"n1": StateFailed},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/DrainTimedOut", v1alpha1.ConditionProgressing: "False/Halted"},
				messages:   map[string][]string{v1alpha1.ConditionFailed: {"Node n1: DrainTimedOut: the drain did not finish within 10m0s; blocked by default/web-0, kube-system/db-1"}},
				details:    map[string]string{"n1": "KubeletConfigReady=False DrainTimedOut, blocked by default/web-0, kube-system/db-1"}}},
		{name: "a drain that timed out on a Node the rollout did not move fails nothing", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", drainTimedOut(v3, pdbMessage, "default/web-0")), newNode("n2")),
			want: want{assign: []string{"n2"}, reverts: map[string]*string{}, states: map[string]NodeState{"n1": StateDegraded},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"},
				messages:   map[string][]string{v1alpha1.ConditionProgressing: {"n1 (reports kubelet-configs/pool-blue-v3 (resourceVersion 30) failed (DrainTimedOut: " + pdbMessage + ")"}}}},
		{name: "a timed-out status the condition does not confirm yet fails nothing", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", drainTimedOut(v3, "x", "default/web-0"), movedFrom(nil), func(n *corev1.Node) {
				n.Status.Conditions[1].Reason = contract.ReasonDraining
			}), newNode("n2")),
			want: want{states: map[string]NodeState{"n1": StateInTrial}, conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"}}},
		{name: "a drain that timed out for another configuration blocks nothing but the Node", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", drainTimedOut(v2, "x", "default/web-0")), newNode("n2")),
			want: want{assign: []string{"n2"}, states: map[string]NodeState{"n1": StateUnavailable},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"},
				details:    map[string]string{"n1": "KubeletConfigReady=False DrainTimedOut, blocked by default/web-0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt) })
	}
}

// Every assignment tells the agent spec.drain; Auto by removing the
// annotation, so that a mode an earlier rollout wrote does not linger.
func TestAssignmentsCarryTheDrainMode(t *testing.T) {
	stale := func(n *corev1.Node) { n.Annotations[contract.DrainAnnotation] = contract.DrainNever }
	for _, tc := range []struct {
		mode v1alpha1.DrainMode
		want *string // nil: removed
	}{
		{"", nil},
		{v1alpha1.DrainAuto, nil},
		{v1alpha1.DrainAlways, ptr.To(contract.DrainAlways)},
		{v1alpha1.DrainNever, ptr.To(contract.DrainNever)},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			r := newRollout(statusFor(v3), drainMode(tc.mode), maxUnavailable(intstr.FromInt32(2)))
			d := decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, nodes(newNode("n1", on(v3)), newNode("n2", stale), newNode("n3")))})
			if len(d.Assign) != 2 {
				t.Fatalf("assigned %v, want n2 and n3", changedNodes(d.Assign))
			}
			for _, c := range d.Assign {
				got, ok := c.Annotations[contract.DrainAnnotation]
				switch {
				case !ok:
					t.Errorf("the assignment of %s leaves %s as it is: %v", c.Node, contract.DrainAnnotation, c.Annotations)
				case (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want):
					t.Errorf("the assignment of %s sets %s to %s, want %s", c.Node, contract.DrainAnnotation, orRemoved(got), orRemoved(tc.want))
				}
			}
		})
	}
}

func orRemoved(v *string) string {
	if v == nil {
		return "<removed>"
	}
	return *v
}

// A revert and an undo drop the drain mode with the rest of the
// bookkeeping: no annotation of the rollout's outlives its move.
func TestRevertsRemoveTheDrainMode(t *testing.T) {
	moved := newNode("n1", rolledBack(v3), movedFrom(nil), func(n *corev1.Node) { n.Annotations[contract.DrainAnnotation] = contract.DrainAlways })
	r := newRollout(statusFor(v3), drainMode(v1alpha1.DrainAlways))
	d := decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, nodes(moved))})
	if len(d.Revert) != 1 {
		t.Fatalf("reverted %v, want n1", changedNodes(d.Revert))
	}
	obs := observe(t, nodes(moved))[0]
	undo, ok := Undo(r, &obs)
	if !ok {
		t.Fatal("Undo does not take n1 back")
	}
	for what, c := range map[string]Change{"revert": d.Revert[0], "undo": undo} {
		for _, key := range append([]string{contract.DrainAnnotation}, contract.BookkeepingAnnotations...) {
			if v, ok := c.Annotations[key]; !ok || v != nil {
				t.Errorf("the %s of n1 does not remove %s: %v", what, key, c.Annotations)
			}
		}
	}
}

func TestAnUnknownDrainModeIsRefused(t *testing.T) {
	_, err := Decide(Input{Rollout: newRollout(drainMode("Sometimes")), Target: &v3, Now: now, Nodes: observe(t, nodes(newNode("n1")))})
	if !errors.Is(err, errInvalidDrain) || !strings.Contains(err.Error(), `spec.drain "Sometimes"`) {
		t.Errorf("Decide = %v, want a refusal of spec.drain", err)
	}
}
