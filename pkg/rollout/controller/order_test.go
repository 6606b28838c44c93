package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// TestRoutineAssignmentsDoNotWaitForTheStatus: in a rollout going on in
// the state its stored status shows, the Node after one just updated is
// assigned while the status write is still held; the status is written
// all the same. (TestCanaryAloneAndStatusFirst and
// TestRevertsFollowTheStatus hold the changes of state to the opposite.)
func TestRoutineAssignmentsDoNotWaitForTheStatus(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	target := contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "v2", UID: "uid-v2", ResourceVersion: "7"}
	moved := func(name string, st contract.ConfigStatus, reason string) *corev1.Node {
		n := readyNode(name, blue)
		report, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{
			contract.ConfigSourceAnnotation:         "kubelet-configs/v2",
			contract.RolloutAnnotation:              "r",
			contract.PreviousConfigSourceAnnotation: "",
			contract.ConfigStatusAnnotation:         string(report),
		}
		n.Status.Conditions[1] = corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionTrue, Reason: reason}
		return n
	}
	updated := contract.ConfigStatus{Assigned: &target, Active: &target, LastKnownGood: &target}
	trying := contract.ConfigStatus{Assigned: &target, Active: &target}
	nodes := []*corev1.Node{
		moved("a", updated, contract.ReasonConfigActive),
		moved("b", updated, contract.ReasonConfigActive),
		moved("c", trying, contract.ReasonTrialInProgress),
		readyNode("d", blue), readyNode("e", blue),
	}
	// a and b passed their trials as the rollout recorded: no mark to write.
	for _, n := range nodes[:2] {
		n.Annotations[contract.TrialPassedAnnotation] = rollout.TrialPassedValue(target)
	}
	r := newRollout("r")
	two := intstr.FromInt32(2)
	r.Spec.MaxUnavailable = &two
	// The status as stored by the sync before b was updated: RollingOut
	// with b and c in trial.
	d := decide(t, r, &target, nodes)
	if p := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing); len(d.Assign) != 1 || p == nil || p.Reason != v1alpha1.ReasonRollingOut {
		t.Fatalf("setup: decision %+v", d)
	}
	r.Status = d.Status
	r.Status.Updated, r.Status.InTrial = 1, 2

	gate := make(chan struct{})
	h := start(t, r, func(_ *fake.Clientset, f *fakeRollouts) { f.statusGate = gate }, nodes...)
	h.eventually(t, "the next Node assigned while the status write is held", func() (bool, string) {
		got := h.assigned()
		return got["d"] == "kubelet-configs/v2" || got["e"] == "kubelet-configs/v2", fmt.Sprint(got)
	})
	if got := h.rollouts.writes.list(); len(got) != 1 || got[0] == "status" {
		t.Errorf("writes %v, want one patch and no status yet", got)
	}
	close(gate)
	h.eventually(t, "the status written", func() (bool, string) {
		got, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		return err == nil && got.Status.Updated == 2, fmt.Sprintf("%+v %v", got.Status, err)
	})
	time.Sleep(2 * expectationsTimeout)
	if got := h.assigned(); len(got) != 4 {
		t.Errorf("assigned %v, want a, b, c and one of d and e (c is still in trial)", got)
	}
}

// decide is the decision the controller makes over nodes.
func decide(t *testing.T, r *v1alpha1.KubeletConfigRollout, target *contract.ConfigMapVersion, nodes []*corev1.Node) rollout.Decision {
	t.Helper()
	selector, err := rollout.Selector(r)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := rollout.ObserveSelected(selector, r.Name, []*v1alpha1.KubeletConfigRollout{r}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rollout.Decide(rollout.Input{Rollout: r, Target: target, Nodes: obs, Now: metav1.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
