package rollout

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestDecideProperties checks the rules that hold in every cluster state
// on a few thousand random ones: the budget, who may be assigned and
// reverted, and that a decision depends on the state alone, not on the
// order of the Nodes or on being asked twice.
func TestDecideProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		r, ns := randomCluster(rng)
		obs := observe(t, ns)
		in := Input{Rollout: r, Target: &v3, Nodes: obs, Now: now}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("cluster %d: %s\nspec %+v\nnodes %s", i, fmt.Sprintf(format, args...), r.Spec, describeNodes(ns))
		}

		again, err := Decide(in)
		if err != nil || !reflect.DeepEqual(d, again) {
			fail("asked twice, Decide answers differently")
		}
		shuffled := append([]NodeObservation{}, obs...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if other, err := Decide(Input{Rollout: r, Target: &v3, Nodes: shuffled, Now: now}); err != nil || !reflect.DeepEqual(d, other) {
			fail("the order of the Nodes changes the decision")
		}

		byName := map[string]NodeResult{}
		unavailable := 0
		for _, n := range d.Nodes {
			byName[n.Name] = n
			if n.Unavailable && n.State != StateConflicted {
				unavailable++
			}
		}
		maxU, _ := intstr.GetScaledValueFromIntOrPercent(r.Spec.MaxUnavailable, len(ns), false)
		if room := max(maxU, 1) - unavailable; len(d.Assign) > max(room, 0) {
			fail("assigns %d Nodes with %d unavailable of at most %d", len(d.Assign), unavailable, max(maxU, 1))
		}
		failed := meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionFailed)
		if (failed || r.Spec.Paused) && len(d.Assign) > 0 {
			fail("assigns while failed (%v) or paused (%v)", failed, r.Spec.Paused)
		}
		for _, a := range d.Assign {
			if s := byName[a.Node].State; s != StatePending {
				fail("assigns %s, which is %s", a.Node, s)
			}
		}
		if len(d.Revert) > 0 && (!failed || r.Spec.OnFailure != v1alpha1.FailureRevert) {
			fail("reverts without a failure under onFailure Revert")
		}
		for _, c := range d.Revert {
			o := obs[indexOf(obs, c.Node)]
			if o.Rollout != rolloutName || o.ConfigSource == nil || *o.ConfigSource != source(v3) || len(o.OtherRollouts) > 0 {
				fail("reverts %s, which this rollout did not move or shares with another", c.Node)
			}
		}
	}
}

func indexOf(obs []NodeObservation, name string) int {
	for i := range obs {
		if obs[i].Name == name {
			return i
		}
	}
	panic("no node " + name)
}

// randomCluster is a rollout and up to 12 Nodes, each in one of the states
// agents and other actors leave Nodes in.
func randomCluster(rng *rand.Rand) (*v1alpha1.KubeletConfigRollout, []node) {
	opts := []rolloutOpt{canary(int32(1 + rng.IntN(3)))}
	if rng.IntN(2) == 0 {
		opts = append(opts, maxUnavailable(intstr.FromInt32(int32(1+rng.IntN(4)))))
	} else {
		opts = append(opts, maxUnavailable(intstr.FromString(fmt.Sprintf("%d%%", 1+rng.IntN(100)))))
	}
	if rng.IntN(5) == 0 {
		opts = append(opts, paused())
	}
	if rng.IntN(3) == 0 {
		opts = append(opts, halt())
	}
	if rng.IntN(4) == 0 {
		opts = append(opts, statusFor(v3))
	}
	r := newRollout(opts...)

	states := []nodeOpt{
		func(*corev1.Node) {}, on(v3), on(v2), trying(v3), trying(v2), assignedOnly(v3), noAgent,
		rolledBack(v2), invalid(v2),
	}
	// Failures of the target are rarer, so that most clusters are mid-rollout.
	if rng.IntN(4) == 0 {
		states = append(states, rolledBack(v3), invalid(v3))
	}
	var out []node
	for i := range rng.IntN(13) {
		n := newNode(fmt.Sprintf("n%02d", i), states[rng.IntN(len(states))])
		if rng.IntN(5) == 0 {
			notReady(n)
		}
		if _, ok := n.Annotations[contract.ConfigSourceAnnotation]; ok && rng.IntN(2) == 0 {
			movedFrom([]*string{nil, ptr.To(""), ptr.To(source(v2))}[rng.IntN(3)])(n)
		}
		var others []string
		if rng.IntN(8) == 0 {
			others = []string{"pool-green"}
		}
		out = append(out, node{Node: n, others: others})
	}
	return r, out
}

func describeNodes(ns []node) string {
	s := ""
	for _, n := range ns {
		s += fmt.Sprintf("\n  %s annotations=%v conditions=%v others=%v", n.Name, n.Annotations, n.Status.Conditions, n.others)
	}
	return s
}
