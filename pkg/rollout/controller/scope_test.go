package controller

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// nodeStateRefusal is the refusal nodeguard's webhook gives for a Node's
// own state, as the apiserver hands it to the client.
func nodeStateRefusal(node string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `admission webhook "nodes.nodeguard.dev" denied the request: nodeguard rule 5 (feature-gates): kubelet v1.33.0 of Node ` + node + ` does not know gate Foo`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: contract.CauseNodeState, Field: "status.nodeInfo.kubeletVersion"}}},
	}}
}

// TestANodeRefusedForItsOwnStateIsSkipped: the refusal of one Node's
// assignment for that Node's own state skips the Node, fails nothing, and
// the others are assigned.
func TestANodeRefusedForItsOwnStateIsSkipped(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	refuseB := func(kube *fake.Clientset, _ *fakeRollouts) {
		kube.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.(clienttesting.PatchAction).GetName() == "b" {
				return true, nil, nodeStateRefusal("b")
			}
			return false, nil, nil
		})
	}
	r := newRollout("r")
	r.Spec.MaxUnavailable = nil
	h := start(t, r, refuseB, movedAndUpdated(t, "a", blue), readyNode("b", blue), readyNode("c", blue))
	h.eventually(t, "b skipped and c assigned", func() (bool, string) {
		got, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		skipped := len(got.Status.SkippedNodes) == 1 && got.Status.SkippedNodes[0].Name == "b"
		return skipped && h.assigned()["c"] == "kubelet-configs/v2", fmt.Sprintf("status %+v, assigned %v", got.Status, h.assigned())
	})
	got, _ := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
	if meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionFailed) {
		t.Errorf("a Node-state refusal failed the rollout: %+v", meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFailed))
	}
	if _, ok := h.assigned()["b"]; ok {
		t.Errorf("b was assigned: %v", h.assigned())
	}
}

// TestAPassedTrialIsMarkedOnTheNode: a Node the rollout moved that reports
// the target updated gets the trial-passed mark, and nothing else.
func TestAPassedTrialIsMarkedOnTheNode(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	h := start(t, newRollout("r"), nil, movedAndUpdated(t, "a", blue))
	h.eventually(t, "the trial-passed mark on a", func() (bool, string) {
		n, err := h.kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Annotations[contract.TrialPassedAnnotation] == "kubelet-configs/v2@7", fmt.Sprintf("%v", n.Annotations)
	})
}

// TestAnIneligibleTargetIsReportedAsSuch: the informer holds only eligible
// ConfigMaps; the controller reads one it lacks to tell why.
func TestAnIneligibleTargetIsReportedAsSuch(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	r := newRollout("r")
	r.Spec.ConfigMapRef.Name = "unlabelled"
	h := startWithConfigMaps(t, r, []*metav1.PartialObjectMetadata{configMapMeta("unlabelled", nil)}, readyNode("a", blue))
	h.eventually(t, "TargetNotEligible", func() (bool, string) {
		got, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
		return c != nil && c.Reason == v1alpha1.ReasonTargetNotEligible, fmt.Sprintf("%+v", c)
	})
	if got := h.assigned(); len(got) != 0 {
		t.Errorf("assigned %v", got)
	}
}
