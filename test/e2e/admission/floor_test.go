package admission_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestReservationsBelowTheFloorAreWarned: assigning a configuration whose
// reservations leave a node less than the policy's allocatableFloorPercent
// (50 unless set) of the capacity it reports is allowed, with a warning
// that names the node, the resource and how much is left; a configuration
// that leaves enough is assigned without one. Through the real apiserver,
// which hands the webhook's warnings to the client.
func TestReservationsBelowTheFloorAreWarned(t *testing.T) {
	h := newHarness(t, env)
	admin, seen := h.adminWithWarnings()
	node := h.mustRegister("floor")
	n, err := h.admin.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if _, err := h.nodeClient(node).CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("%s reporting its capacity: %v", node, err)
	}
	reserved := h.mustConfigMap("floor-reserved", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeReserved:\n  cpu: 1950m\n", true)
	roomy := h.mustConfigMap("floor-roomy", goodConfig, true)

	unassign := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, contract.ConfigSourceAnnotation)
	// assign returns the warnings of an assignment the webhook judged:
	// until its cache shows a ConfigMap just created, it warns that the
	// ConfigMap is not eligible and judges nothing else.
	assign := func(ref string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			seen.take()
			if _, err := admin.CoreV1().Nodes().Patch(h.ctx, node, types.MergePatchType, annotationPatch(ref), metav1.PatchOptions{}); err != nil {
				t.Fatalf("assigning %s: %v", ref, err)
			}
			warnings := seen.take()
			if !strings.Contains(warnings, "not an eligible kubelet configuration") || time.Now().After(deadline) {
				return warnings
			}
			if _, err := admin.CoreV1().Nodes().Patch(h.ctx, node, types.MergePatchType, unassign, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	want := fmt.Sprintf("%s leaves node %s less than 50%% of its capacity allocatable (allocatableFloorPercent), as the Node reports its capacity: cpu: 50m of 2 allocatable (2%%)", reserved, node)
	if warnings := assign(reserved); !strings.Contains(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	if warnings := assign(roomy); strings.Contains(warnings, "allocatableFloorPercent") {
		t.Errorf("a configuration that leaves the node its capacity was warned: %q", warnings)
	}
}
