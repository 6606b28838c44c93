package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// patchBodies records the body of every Node patch sent, by Node.
type patchBodies struct {
	mu     sync.Mutex
	byNode map[string][]string
}

func (p *patchBodies) record(kube *fake.Clientset, _ *fakeRollouts) {
	p.byNode = map[string][]string{}
	kube.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a := action.(clienttesting.PatchAction)
		p.mu.Lock()
		p.byNode[a.GetName()] = append(p.byNode[a.GetName()], string(a.GetPatch()))
		p.mu.Unlock()
		return false, nil, nil
	})
}

func (p *patchBodies) of(node string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.byNode[node]...)
}

func (h *harness) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := h.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAssignmentPatchCarriesTheDrainMode: the patch that assigns a Node
// writes the rollout's spec.drain in the same request (Always and Never as
// they are, Auto by removing what an earlier rollout left), so the agent
// never sees the assignment without the mode.
func TestAssignmentPatchCarriesTheDrainMode(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	for _, tc := range []struct {
		mode     v1alpha1.DrainMode
		inPatch  string
		want     string
		wantSome bool
	}{
		{v1alpha1.DrainNever, `"nodeguard.dev/drain":"Never"`, contract.DrainNever, true},
		{v1alpha1.DrainAlways, `"nodeguard.dev/drain":"Always"`, contract.DrainAlways, true},
		{v1alpha1.DrainAuto, `"nodeguard.dev/drain":null`, "", false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			r := newRollout("r")
			r.Spec.Drain = tc.mode
			// A mode an earlier rollout left behind.
			stale := readyNode("a", blue)
			stale.Annotations = map[string]string{contract.DrainAnnotation: "Sometimes"}
			bodies := &patchBodies{}
			h := start(t, r, bodies.record, stale, readyNode("b", blue))
			h.eventually(t, "the canary assigned", func() (bool, string) {
				got := h.assigned()
				return got["a"] == "kubelet-configs/v2", fmt.Sprint(got)
			})
			sent := bodies.of("a")
			if len(sent) == 0 || !strings.Contains(sent[0], `"nodeguard.dev/config-source":"kubelet-configs/v2"`) || !strings.Contains(sent[0], tc.inPatch) {
				t.Errorf("patches of a: %q, want the assignment with %s", sent, tc.inPatch)
			}
			got, ok := h.node(t, "a").Annotations[contract.DrainAnnotation]
			if ok != tc.wantSome || got != tc.want {
				t.Errorf("%s on the assigned Node = %q (present %v), want %q (present %v)", contract.DrainAnnotation, got, ok, tc.want, tc.wantSome)
			}
		})
	}
}

// TestRevertRemovesTheDrainMode: a revert takes the drain mode off with the
// rest of the bookkeeping, so the previous source goes back under the
// agent's own default.
func TestRevertRemovesTheDrainMode(t *testing.T) {
	blue := map[string]string{"pool": "blue"}
	failed := readyNode("a", blue)
	failed.Annotations = map[string]string{
		contract.ConfigSourceAnnotation:         "kubelet-configs/v2",
		contract.RolloutAnnotation:              "r",
		contract.PreviousConfigSourceAnnotation: "kubelet-configs/v1",
		contract.DrainAnnotation:                contract.DrainNever,
	}
	reportOn(t, failed, false)
	r := newRollout("r")
	r.Spec.Drain = v1alpha1.DrainNever
	h := start(t, r, nil, failed, readyNode("b", blue))
	h.eventually(t, "a reverted", func() (bool, string) {
		got := h.assigned()
		return got["a"] == "kubelet-configs/v1", fmt.Sprint(got)
	})
	annotations := h.node(t, "a").Annotations
	for _, key := range contract.BookkeepingAnnotations {
		if v, ok := annotations[key]; ok {
			t.Errorf("%s=%q left on the reverted Node", key, v)
		}
	}
	if _, ok := annotations[contract.DrainAnnotation]; ok {
		t.Errorf("%s left on the reverted Node: %v", contract.DrainAnnotation, annotations)
	}
}
