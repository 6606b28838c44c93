package controller

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// TestDecisionBasisUnchanged: a Node written since the decision is still the
// one decided on when only what Decide does not read moved (a kubelet's
// status report: its resourceVersion and heartbeat), and not when anything
// it reads did.
func TestDecisionBasisUnchanged(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	seen := readyNode("a", blue)
	seen.ResourceVersion = "10"
	seen.Annotations = map[string]string{contract.ConfigSourceAnnotation: "kubelet-configs/v1"}
	r := newRollout("r")
	selector, err := rollout.Selector(r)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := rollout.ObserveNode(seen, nil)
	if err != nil {
		t.Fatal(err)
	}
	basis := decisionBasis{rollout: "r", selector: selector, rollouts: []*v1alpha1.KubeletConfigRollout{r},
		observed: map[string]rollout.NodeObservation{"a": obs}}

	other := newRollout("other")
	for _, tc := range []struct {
		name   string
		change func(n *corev1.Node, b *decisionBasis)
		want   bool
	}{
		{"a heartbeat", func(n *corev1.Node, _ *decisionBasis) {
			n.ResourceVersion = "11"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(1000, 0))
		}, true},
		{"an unrelated label", func(n *corev1.Node, _ *decisionBasis) { n.Labels = map[string]string{"pool": "blue", "zone": "z"} }, true},
		{"NotReady", func(n *corev1.Node, _ *decisionBasis) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, false},
		{"left the selection", func(n *corev1.Node, _ *decisionBasis) { n.Labels = map[string]string{"pool": "green"} }, false},
		{"assigned elsewhere", func(n *corev1.Node, _ *decisionBasis) {
			n.Annotations[contract.ConfigSourceAnnotation] = "kubelet-configs/other"
		}, false},
		{"an agent's report", func(n *corev1.Node, _ *decisionBasis) { n.Status.Conditions[1].Reason = "TrialInProgress" }, false},
		{"picked by another rollout too", func(_ *corev1.Node, b *decisionBasis) { b.rollouts = append(b.rollouts, other) }, false},
		{"not among the Nodes decided on", func(n *corev1.Node, _ *decisionBasis) { n.Name = "b" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := seen.DeepCopy()
			b := basis
			b.rollouts = append([]*v1alpha1.KubeletConfigRollout(nil), basis.rollouts...)
			tc.change(node, &b)
			if got := b.unchanged(node); got != tc.want {
				t.Errorf("unchanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestConflictOverAHeartbeatIsPatchedAgainAtOnce: an assignment whose patch
// meets a conflict, caused by a write the decision did not read, is patched
// again right after reading the Node; one whose Node changed in what the
// decision read is left to the next decision.
func TestConflictOverAHeartbeatIsPatchedAgainAtOnce(t *testing.T) {
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	for _, tc := range []struct {
		name string
		// moved changes the Node as the write behind the conflict did.
		moved       func(n *corev1.Node)
		wantRetried bool
	}{
		{"a status report", func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(1000, 0)) }, true},
		{"an agent's report", func(n *corev1.Node) { n.Status.Conditions[1].Message = "reported again" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blue := map[string]string{"pool": "blue"}
			var patches atomic.Int32
			var kube *fake.Clientset
			conflictOnce := func(c *fake.Clientset, _ *fakeRollouts) {
				kube = c
				c.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
					if action.(clienttesting.PatchAction).GetName() != "a" || patches.Add(1) > 1 {
						return false, nil, nil
					}
					obj, err := c.Tracker().Get(nodes, "", "a")
					if err != nil {
						return true, nil, err
					}
					node := obj.(*corev1.Node).DeepCopy()
					tc.moved(node)
					if err := c.Tracker().Update(nodes, node, ""); err != nil {
						return true, nil, err
					}
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "a", errors.New("the object has been modified"))
				})
			}
			h := start(t, newRollout("r"), conflictOnce, readyNode("a", blue), readyNode("b", blue))
			h.eventually(t, "the canary assigned", func() (bool, string) {
				got := h.assigned()
				return got["a"] == "kubelet-configs/v2", fmt.Sprintf("assigned %v", got)
			})
			if got := nodeCalls(kube); !strings.HasPrefix(got, "patch a (application/merge-patch+json), get a, patch a (application/merge-patch+json)") {
				t.Errorf("Node calls %q: want the conflicting patch of the canary, a read of it, and the patch that assigned it", got)
			}
			retried := testutil.ToFloat64(h.ctrl.metrics.changes.WithLabelValues("r", "assign", resultRetried))
			decidedAgain := testutil.ToFloat64(h.ctrl.metrics.changes.WithLabelValues("r", "assign", resultConflict))
			want := [2]float64{0, 1}
			if tc.wantRetried {
				want = [2]float64{1, 0}
			}
			if retried != want[0] || decidedAgain != want[1] {
				t.Errorf("patches retried at once %v and left to the next decision %v, want %v and %v", retried, decidedAgain, want[0], want[1])
			}
		})
	}
}
