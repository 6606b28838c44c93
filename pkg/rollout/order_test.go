package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// TestStatusFirstOnEveryChangeOfState runs a rollout whose sixth Node
// fails its trial and asks, of every decision, whether its status goes
// before its Node changes: the canary, the first batch after it and the
// reverts must wait for it; the later batches of the same state need not.
func TestStatusFirstOnEveryChangeOfState(t *testing.T) {
	c := newCluster(t, newRollout(maxUnavailable(intstr.FromInt32(2))), 9)
	c.fails["n05"] = true
	type seen struct {
		reason  string
		assigns int
		reverts int
		first   bool
	}
	var decisions []seen
	for round := 0; round < 40; round++ {
		d := c.decide()
		reason := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing).Reason
		if len(d.Assign)+len(d.Revert) > 0 {
			decisions = append(decisions, seen{reason, len(d.Assign), len(d.Revert), d.ChangesState(c.rollout.Status)})
		}
		c.apply(d, true)
		if reason == v1alpha1.ReasonReverted {
			break
		}
		c.step()
	}
	t.Logf("decisions: %+v", decisions)
	routine := 0
	previous := ""
	for i, s := range decisions {
		switch {
		case s.reverts > 0 && !s.first:
			t.Errorf("decision %d (%+v) reverts without its status first", i, s)
		case s.reason != previous && !s.first:
			t.Errorf("decision %d (%+v) moves from %q without its status first", i, s, previous)
		case s.reason == previous && s.reverts == 0 && s.first:
			t.Errorf("decision %d (%+v) waits for a status write though it only moves on in %s", i, s, s.reason)
		case !s.first:
			routine++
		}
		previous = s.reason
	}
	if len(decisions) < 4 || decisions[0].reason != v1alpha1.ReasonCanary || decisions[len(decisions)-1].reverts == 0 {
		t.Fatalf("the run did not go canary, batches, revert: %+v", decisions)
	}
	if routine == 0 {
		t.Errorf("no batch went out beside its status: %+v", decisions)
	}
}

// TestStatusFirstWhenTheRolloutChanged: a decision that assigns in the
// same state still waits for its status when the stored one is of another
// generation or target, or has not been written yet.
func TestStatusFirstWhenTheRolloutChanged(t *testing.T) {
	c := newCluster(t, newRollout(maxUnavailable(intstr.FromInt32(2))), 9)
	var routine Decision
	var stored v1alpha1.KubeletConfigRolloutStatus
	for round := 0; round < 20 && routine.Assign == nil; round++ {
		d := c.decide()
		if len(d.Assign) > 0 && !d.ChangesState(c.rollout.Status) {
			routine, stored = d, *c.rollout.Status.DeepCopy()
			break
		}
		c.apply(d, true)
		c.step()
	}
	if routine.Assign == nil {
		t.Fatal("no decision went out beside its status")
	}
	for name, edit := range map[string]func(*v1alpha1.KubeletConfigRolloutStatus){
		"an older generation": func(st *v1alpha1.KubeletConfigRolloutStatus) { st.ObservedGeneration-- },
		"another target":      func(st *v1alpha1.KubeletConfigRolloutStatus) { st.Target = &v3b },
		"no target":           func(st *v1alpha1.KubeletConfigRolloutStatus) { st.Target = nil },
		"never written":       func(st *v1alpha1.KubeletConfigRolloutStatus) { *st = v1alpha1.KubeletConfigRolloutStatus{} },
		"a condition fewer":   func(st *v1alpha1.KubeletConfigRolloutStatus) { st.Conditions = st.Conditions[1:] },
		"paused shown": func(st *v1alpha1.KubeletConfigRolloutStatus) {
			meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPaused).Status = "True"
		},
	} {
		st := *stored.DeepCopy()
		edit(&st)
		if !routine.ChangesState(st) {
			t.Errorf("over a stored status with %s, the assignments do not wait for the status", name)
		}
	}
}
