package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

var harnessTarget = contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "v2", UID: "uid-v2", ResourceVersion: "7"}

// reportOn makes node report the harness's target as its agent would:
// passed (active and last-known-good) or failed its trial.
func reportOn(t *testing.T, node *corev1.Node, passed bool) {
	t.Helper()
	st := contract.ConfigStatus{Assigned: &harnessTarget, Active: &harnessTarget, LastKnownGood: &harnessTarget}
	cond := corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionTrue, Reason: contract.ReasonConfigActive}
	if !passed {
		st = contract.ConfigStatus{Assigned: &harnessTarget, Error: "the kubelet did not come back"}
		cond = corev1.NodeCondition{Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionFalse, Reason: contract.ReasonRolledBack}
	}
	report, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[contract.ConfigStatusAnnotation] = string(report)
	node.Status.Conditions[1] = cond
}

// movedAndUpdated is a Node the rollout r moved that passed its trial.
func movedAndUpdated(t *testing.T, name string, labels map[string]string) *corev1.Node {
	n := readyNode(name, labels)
	n.Annotations = map[string]string{
		contract.ConfigSourceAnnotation:         "kubelet-configs/v2",
		contract.RolloutAnnotation:              "r",
		contract.PreviousConfigSourceAnnotation: "",
	}
	reportOn(t, n, true)
	return n
}

// heldPatches is a client whose patches of one Node wait for release,
// then log "answered NODE" once applied.
type heldPatches struct {
	kubernetes.Interface
	node    string
	release <-chan struct{}
	log     *writeLog
}

// IsWatchListSemanticsUnSupported keeps the fake's answer, which the
// embedded interface hides: client-go's fake serves no watch lists.
func (heldPatches) IsWatchListSemanticsUnSupported() bool { return true }

func (k heldPatches) CoreV1() corev1client.CoreV1Interface {
	return heldCoreV1{k.Interface.CoreV1(), k}
}

type heldCoreV1 struct {
	corev1client.CoreV1Interface
	held heldPatches
}

func (c heldCoreV1) Nodes() corev1client.NodeInterface {
	return heldNodes{c.CoreV1Interface.Nodes(), c.held}
}

type heldNodes struct {
	corev1client.NodeInterface
	held heldPatches
}

func (n heldNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	if name != n.held.node {
		return n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
	}
	select {
	case <-n.held.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	node, err := n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
	n.held.log.add("answered " + name)
	return node, err
}

// startHolding starts the harness with the patches of node held until
// release is closed, which the test's cleanup does if the test did not.
func startHolding(t *testing.T, r *v1alpha1.KubeletConfigRollout, node string, nodes ...*corev1.Node) (*harness, func()) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	var log *writeLog
	h := startWrapped(t, r, func(_ *fake.Clientset, rollouts *fakeRollouts) { log = &rollouts.writes },
		func(kube kubernetes.Interface) kubernetes.Interface {
			return heldPatches{Interface: kube, node: node, release: release, log: log}
		}, nodes...)
	t.Cleanup(open)
	return h, open
}

func (h *harness) report(t *testing.T, name string, passed bool) {
	t.Helper()
	node, err := h.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reportOn(t, node, passed)
	if _, err := h.kube.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestANodeThatPassesFreesItsSlotWhilePatchesAreInFlight: the next
// assignment does not wait for the round trip of one still in flight, and
// the one in flight counts against maxUnavailable meanwhile.
func TestANodeThatPassesFreesItsSlotWhilePatchesAreInFlight(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	r := newRollout("r")
	r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	h, release := startHolding(t, r, "b", movedAndUpdated(t, "a", blue),
		readyNode("b", blue), readyNode("c", blue), readyNode("d", blue), readyNode("e", blue))
	h.eventually(t, "c assigned beside b, whose patch is held", func() (bool, string) {
		got := h.assigned()
		return got["c"] != "", fmt.Sprint(got)
	})
	h.report(t, "c", true)
	h.eventually(t, "d assigned in c's slot while b's patch is held", func() (bool, string) {
		got := h.assigned()
		return got["d"] != "", fmt.Sprint(got)
	})
	if got := h.assigned(); got["e"] != "" {
		t.Fatalf("e assigned with b and d in trial, over maxUnavailable 2: %v", got)
	}
	release()
	h.eventually(t, "b's patch answered", func() (bool, string) {
		return slices.Contains(h.rollouts.writes.list(), "answered b"), fmt.Sprint(h.rollouts.writes.list())
	})
	h.ctrl.queue.Add("r")
	time.Sleep(100 * time.Millisecond)
	if got := h.assigned(); got["e"] != "" || got["b"] == "" {
		t.Errorf("with b and d in trial: %v, want b assigned and e not", got)
	}
}

// TestAFailureWaitsForTheAssignmentsInFlight: a Node failing its trial
// while another's assignment is in flight fails the rollout only once that
// assignment is answered, and the revert covers it.
func TestAFailureWaitsForTheAssignmentsInFlight(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	r := newRollout("r")
	r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	r.Spec.OnFailure = v1alpha1.FailureRevert
	h, release := startHolding(t, r, "b", movedAndUpdated(t, "a", blue), readyNode("b", blue), readyNode("c", blue))
	h.eventually(t, "c assigned beside b, whose patch is held", func() (bool, string) {
		got := h.assigned()
		return got["c"] != "", fmt.Sprint(got)
	})
	h.report(t, "c", false)
	h.ctrl.queue.Add("r")
	time.Sleep(200 * time.Millisecond)
	stored, err := h.rollouts.Get(context.Background(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if meta.IsStatusConditionTrue(stored.Status.Conditions, v1alpha1.ConditionFailed) || h.assigned()["c"] == "" {
		t.Fatalf("failed or reverted while b's assignment was in flight: %+v, %v", stored.Status.Conditions, h.assigned())
	}
	release()
	h.eventually(t, "every moved Node reverted, b among them", func() (bool, string) {
		got := h.assigned()
		return got["a"] == "" && got["b"] == "" && got["c"] == "", fmt.Sprint(got)
	})
	writes := h.rollouts.writes.list()
	var patchesOfC []int
	for i, w := range writes {
		if w == "patch c" {
			patchesOfC = append(patchesOfC, i)
		}
	}
	if answered := slices.Index(writes, "answered b"); len(patchesOfC) < 2 || answered < 0 || patchesOfC[1] < answered {
		t.Errorf("writes %v: want c's revert after b's assignment was answered", writes)
	}
}
