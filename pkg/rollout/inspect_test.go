package rollout

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

func labelled(n *corev1.Node, labels map[string]string) *corev1.Node {
	n.Labels = labels
	return n
}

func TestObserveSelectedPicksAndObservesAsDecideWants(t *testing.T) {
	self := newRollout()
	zone := selecting("zone-a", metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}})
	broken := newNode("n3")
	broken.Annotations[contract.ConfigStatusAnnotation] = "{"
	all := []*corev1.Node{
		labelled(newNode("n1", trying(v3), movedFrom(nil)), map[string]string{"pool": "blue"}),
		labelled(newNode("n2"), map[string]string{"pool": "blue", "zone": "a"}),
		labelled(broken, map[string]string{"pool": "blue"}),
		labelled(newNode("other"), map[string]string{"pool": "green"}),
	}
	selector, err := Selector(self)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := ObserveSelected(selector, self.Name, []*v1alpha1.KubeletConfigRollout{self, zone}, all)
	if err == nil || !strings.Contains(err.Error(), "node n3") {
		t.Errorf("error %v, want the unreadable status of n3", err)
	}
	var names []string
	for _, o := range obs {
		names = append(names, o.Name)
	}
	if want := []string{"n1", "n2", "n3"}; !slices.Equal(names, want) {
		t.Fatalf("observed %v, want %v", names, want)
	}
	if !slices.Equal(obs[1].OtherRollouts, []string{"zone-a"}) || len(obs[0].OtherRollouts) != 0 {
		t.Errorf("other rollouts %v, %v", obs[0].OtherRollouts, obs[1].OtherRollouts)
	}
	d, err := Decide(Input{Rollout: self, Target: &v3, Nodes: obs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]NodeState{}
	for _, n := range d.Nodes {
		states[n.Name] = n.State
	}
	if states["n1"] != StateInTrial || states["n2"] != StateConflicted || states["n3"] != StatePending {
		t.Errorf("states %v", states)
	}
}

func TestUndoIsTheRevertOfTheNodesTheRolloutMoved(t *testing.T) {
	fromV2 := source(v2)
	r := newRollout(statusFor(v3))
	cases := []struct {
		name string
		node *corev1.Node
		ok   bool
		// restored is the config-source the change writes, nil to remove it.
		restored *string
	}{
		{"moved from v2", newNode("n", on(v3), movedFrom(&fromV2)), true, &fromV2},
		{"moved from nothing", newNode("n", trying(v3), movedFrom(nil)), true, nil},
		{"moved from the local configuration", newNode("n", rolledBack(v3), movedFrom(new(string))), true, new(string)},
		{"moved by another rollout", newNode("n", on(v3), movedByFrom("zone-a", nil)), false, nil},
		{"re-pointed since", newNode("n", on(v4), movedFrom(&fromV2)), false, nil},
		{"never moved", newNode("n", on(v3)), false, nil},
		{"moved to the old target, the spec names a new one", newNode("n", on(v3), movedFrom(&fromV2)), true, &fromV2},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rollout := r
			if i == len(cases)-1 {
				rollout = newRollout(statusFor(v3), targeting(v4))
			}
			obs, err := ObserveNode(tc.node, nil)
			if err != nil {
				t.Fatal(err)
			}
			change, ok := Undo(rollout, &obs)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			got := change.Annotations[contract.ConfigSourceAnnotation]
			if (got == nil) != (tc.restored == nil) || (got != nil && *got != *tc.restored) {
				t.Errorf("config-source %v, want %v", got, tc.restored)
			}
			for _, key := range []string{contract.RolloutAnnotation, contract.PreviousConfigSourceAnnotation} {
				if v, present := change.Annotations[key]; !present || v != nil {
					t.Errorf("%s: %v, %v; want removed", key, v, present)
				}
			}
			if change.Node != "n" || change.ResourceVersion != "1" {
				t.Errorf("change of %s at %q", change.Node, change.ResourceVersion)
			}
		})
	}
}
