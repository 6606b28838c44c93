package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// want is what a case expects of a decision; zero fields are not checked.
type want struct {
	assign []string
	// reverts maps each reverted Node to the config-source it goes back
	// to, nil for none (the annotation removed).
	reverts map[string]*string
	states  map[string]NodeState
	// conditions maps a condition type to "Status/Reason".
	conditions map[string]string
	// messages maps a condition type to parts its message must contain.
	messages map[string][]string
	// counts are selected, updated, inTrial, failed.
	counts *[4]int32
	target *contract.ConfigMapVersion
	// details maps a Node to its verdict's Detail, in full.
	details map[string]string
}

type testCase struct {
	name     string
	rollout  *v1alpha1.KubeletConfigRollout
	target   *contract.ConfigMapVersion // nil: v3
	missing  bool                       // the target ConfigMap does not exist
	nodes    []node
	refusals []Refusal
	want     want
}

func TestDecide(t *testing.T) {
	fromV2 := ptr.To(source(v2))
	tests := []testCase{
		// The canary.
		{name: "canary goes first and alone", rollout: newRollout(maxUnavailable(intstr.FromInt32(3))),
			nodes: nodes(newNode("n1"), newNode("n2"), newNode("n3"), newNode("n4")),
			want: want{assign: []string{"n1"}, conditions: map[string]string{
				v1alpha1.ConditionProgressing: "True/Canary", v1alpha1.ConditionComplete: "False/Canary",
				v1alpha1.ConditionFailed: "False/NoFailure", v1alpha1.ConditionPaused: "False/NotPaused"},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"assigning n1"}}}},
		{name: "canary stays alone through its whole trial", rollout: newRollout(maxUnavailable(intstr.FromInt32(3))),
			nodes: nodes(newNode("n1", trying(v3), movedFrom(nil)), newNode("n2"), newNode("n3")),
			want: want{assign: []string{}, states: map[string]NodeState{"n1": StateInTrial, "n2": StatePending},
				conditions: map[string]string{v1alpha1.ConditionProgressing: "True/Canary"},
				messages:   map[string][]string{v1alpha1.ConditionProgressing: {"waiting on n1"}}}},
		{name: "canary Nodes take the target together", rollout: newRollout(canary(2), maxUnavailable(intstr.FromInt32(3))),
			nodes: nodes(newNode("n1"), newNode("n2"), newNode("n3"), newNode("n4")),
			want:  want{assign: []string{"n1", "n2"}}},
		{name: "canary is held to maxUnavailable", rollout: newRollout(canary(2), maxUnavailable(intstr.FromInt32(1))),
			nodes: nodes(newNode("n1"), newNode("n2"), newNode("n3")),
			want:  want{assign: []string{"n1"}}},
		{name: "canary is no larger than the Nodes to update", rollout: newRollout(canary(5), maxUnavailable(intstr.FromInt32(5))),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", on(v3)), newNode("n3")),
			want: want{assign: []string{"n3"}, conditions: map[string]string{v1alpha1.ConditionProgressing: "True/Canary"},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"canary of 3"}}}},
		{name: "canary updated: the rest follow", rollout: newRollout(maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2"), newNode("n3"), newNode("n4")),
			want: want{assign: []string{"n2", "n3"}, conditions: map[string]string{v1alpha1.ConditionProgressing: "True/RollingOut"},
				counts: &[4]int32{4, 1, 0, 0}}},

		// maxUnavailable.
		{name: "a Node in trial counts against maxUnavailable", rollout: newRollout(maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", trying(v3)), newNode("n3"), newNode("n4")),
			want:  want{assign: []string{"n3"}, counts: &[4]int32{4, 1, 1, 0}}},
		{name: "a Node assigned but not yet reporting counts against maxUnavailable", rollout: newRollout(),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", assignedOnly(v3)), newNode("n3")),
			want:  want{assign: []string{}, states: map[string]NodeState{"n2": StateInTrial}}},
		{name: "a Node down at the start counts against maxUnavailable and waits", rollout: newRollout(),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", notReady), newNode("n3")),
			want: want{assign: []string{}, states: map[string]NodeState{"n2": StateUnavailable, "n3": StatePending},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"waiting on n2 (not Ready)", "1 unavailable (at most 1)"}}}},
		{name: "a Node down is never the canary", rollout: newRollout(maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", notReady), newNode("n2"), newNode("n3")),
			want:  want{assign: []string{"n2"}, states: map[string]NodeState{"n1": StateUnavailable}}},
		{name: "a Node failing another configuration counts against maxUnavailable", rollout: newRollout(maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", rolledBack(v2)), newNode("n3"), newNode("n4")),
			want: want{assign: []string{"n3"}, states: map[string]NodeState{"n2": StateUnavailable},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"}}},
		{name: "maxUnavailable as a percentage rounds down", rollout: newRollout(maxUnavailable(intstr.FromString("25%"))),
			nodes: nodes(newNode("n01", on(v3)), newNode("n02"), newNode("n03"), newNode("n04"), newNode("n05"),
				newNode("n06"), newNode("n07"), newNode("n08"), newNode("n09"), newNode("n10")),
			want: want{assign: []string{"n02", "n03"}}},
		{name: "maxUnavailable as a percentage is at least one Node", rollout: newRollout(maxUnavailable(intstr.FromString("10%"))),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2"), newNode("n3")),
			want:  want{assign: []string{"n2"}}},

		// Failures.
		{name: "a failed trial stops the rollout and reverts the moved Nodes", rollout: newRollout(),
			nodes: nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2", rolledBack(v3), movedFrom(fromV2)), newNode("n3")),
			want: want{assign: []string{}, reverts: map[string]*string{"n1": nil, "n2": fromV2},
				states: map[string]NodeState{"n1": StateReverting, "n2": StateReverting, "n3": StateUntouched},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/TrialFailed", v1alpha1.ConditionProgressing: "False/Reverting",
					v1alpha1.ConditionComplete: "False/Reverting"},
				messages: map[string][]string{v1alpha1.ConditionFailed: {"Node n2: TrialFailed: kubelet unhealthy"}},
				counts:   &[4]int32{3, 1, 0, 1}}},
		{name: "a validation failure reported by an agent stops the rollout", rollout: newRollout(),
			nodes: nodes(newNode("n1", invalid(v3), movedFrom(nil)), newNode("n2")),
			want: want{assign: []string{}, reverts: map[string]*string{"n1": nil},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/ValidationFailed"},
				messages:   map[string][]string{v1alpha1.ConditionFailed: {"Node n1: ValidationFailed: bad field"}}}},
		{name: "an admission refusal of an assignment stops the rollout", rollout: newRollout(),
			nodes:    nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2"), newNode("n3")),
			refusals: []Refusal{{Node: "n2", Message: "rule 5: feature gate Foo is unknown to kubelet v1.35"}},
			want: want{assign: []string{}, reverts: map[string]*string{"n1": nil},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/AssignmentRefused"},
				messages:   map[string][]string{v1alpha1.ConditionFailed: {"Node n2: AssignmentRefused: rule 5"}}}},
		{name: "the Failed condition names the first Node and the others", rollout: newRollout(maxUnavailable(intstr.FromInt32(3))),
			nodes: nodes(newNode("n1", rolledBack(v3), movedFrom(nil)), newNode("n2", invalid(v3), movedFrom(nil)), newNode("n3", rolledBack(v3), movedFrom(nil))),
			want: want{messages: map[string][]string{v1alpha1.ConditionFailed: {"Node n1: TrialFailed", "also failed: n2, n3"}},
				counts: &[4]int32{3, 0, 0, 3}}},
		{name: "onFailure Halt leaves every Node as it is", rollout: newRollout(halt()),
			nodes: nodes(newNode("n1", rolledBack(v3), movedFrom(nil)), newNode("n2")),
			want: want{assign: []string{}, reverts: map[string]*string{},
				states:     map[string]NodeState{"n1": StateFailed, "n2": StateUntouched},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/TrialFailed", v1alpha1.ConditionProgressing: "False/Halted"}}},
		{name: "a revert leaves alone the Nodes this rollout did not move", rollout: newRollout(),
			nodes: nodes(newNode("n1", rolledBack(v3), movedFrom(nil)), newNode("n2", on(v3)),
				newNode("n3", on(v3), movedByFrom("pool-green", nil)), newNode("n4", on(v2), movedFrom(nil))),
			want: want{reverts: map[string]*string{"n1": nil}}},
		{name: "the failure outlasts the revert", rollout: newRollout(failedFor(v3, "n2")),
			nodes: nodes(newNode("n1"), newNode("n2", on(v2))),
			want: want{assign: []string{}, reverts: map[string]*string{},
				states: map[string]NodeState{"n1": StateUntouched, "n2": StateUntouched},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/TrialFailed", v1alpha1.ConditionProgressing: "False/Reverted",
					v1alpha1.ConditionComplete: "False/Reverted"},
				messages: map[string][]string{v1alpha1.ConditionFailed: {"Node n2: TrialFailed"}}}},
		{name: "a failure from an earlier version does not fail this one", rollout: newRollout(statusFor(v3b)),
			target: &v3b,
			nodes:  nodes(newNode("n1", rolledBack(v3), movedFrom(nil)), newNode("n2")),
			want: want{reverts: map[string]*string{}, states: map[string]NodeState{"n1": StateInTrial},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"}}},

		// Pause.
		{name: "paused: no new assignments", rollout: newRollout(paused()),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2"), newNode("n3")),
			want: want{assign: []string{}, states: map[string]NodeState{"n2": StatePending},
				conditions: map[string]string{v1alpha1.ConditionPaused: "True/SpecPaused", v1alpha1.ConditionProgressing: "False/Paused"}}},
		{name: "paused does not hold back a revert", rollout: newRollout(paused()),
			nodes: nodes(newNode("n1", rolledBack(v3), movedFrom(fromV2)), newNode("n2")),
			want: want{reverts: map[string]*string{"n1": fromV2},
				conditions: map[string]string{v1alpha1.ConditionPaused: "True/SpecPaused", v1alpha1.ConditionProgressing: "False/Reverting"}}},

		// A new target.
		{name: "a new resourceVersion of the target starts over from the canary", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(3))),
			target: &v3b,
			nodes:  nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2"), newNode("n3")),
			want: want{assign: []string{}, target: &v3b, states: map[string]NodeState{"n1": StateInTrial},
				conditions: map[string]string{v1alpha1.ConditionProgressing: "True/Canary"}, counts: &[4]int32{3, 0, 1, 0}}},
		{name: "a new configMapRef starts over from the canary", rollout: newRollout(statusFor(v3), targeting(v4), maxUnavailable(intstr.FromInt32(3))),
			target: &v4,
			nodes:  nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2", on(v3), movedFrom(nil)), newNode("n3", on(v3), movedFrom(nil))),
			want: want{assign: []string{"n1"}, target: &v4,
				conditions: map[string]string{v1alpha1.ConditionProgressing: "True/Canary", v1alpha1.ConditionComplete: "False/Canary"}}},
		{name: "a new target forgets the old target's failure", rollout: newRollout(failedFor(v3, "n1"), targeting(v4)),
			target: &v4,
			nodes:  nodes(newNode("n1"), newNode("n2")),
			want:   want{assign: []string{"n1"}, conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"}}},
		{name: "a revert under way finishes before a new target", rollout: newRollout(failedFor(v3, "n1"), targeting(v4)),
			target: &v4,
			nodes:  nodes(newNode("n1", rolledBack(v3), movedFrom(fromV2)), newNode("n2")),
			want: want{assign: []string{}, reverts: map[string]*string{"n1": fromV2}, target: &v3,
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/TrialFailed"}}},

		// Nodes joining, conflicts, completion.
		{name: "a Node joining the selection gets the target within maxUnavailable", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", on(v3)), newNode("n9")),
			want:  want{assign: []string{"n9"}, conditions: map[string]string{v1alpha1.ConditionProgressing: "True/RollingOut"}}},
		{name: "a Node selected by two rollouts is left alone", rollout: newRollout(maxUnavailable(intstr.FromInt32(3))),
			nodes: []node{{Node: newNode("n1", on(v3))}, {Node: newNode("n2"), others: []string{"pool-green"}}, {Node: newNode("n3")}},
			want: want{assign: []string{"n3"}, states: map[string]NodeState{"n2": StateConflicted},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"n2 (also selected by pool-green)"}}}},
		{name: "a Node selected by two rollouts is not reverted", rollout: newRollout(),
			nodes: []node{{Node: newNode("n1", rolledBack(v3), movedFrom(nil))}, {Node: newNode("n2", on(v3), movedFrom(nil)), others: []string{"pool-green"}}},
			want:  want{reverts: map[string]*string{"n1": nil}, states: map[string]NodeState{"n2": StateConflicted}}},
		{name: "only Nodes in conflict left", rollout: newRollout(),
			nodes: []node{{Node: newNode("n1", on(v3))}, {Node: newNode("n2"), others: []string{"pool-green", "pool-red"}}},
			want: want{assign: []string{}, conditions: map[string]string{v1alpha1.ConditionProgressing: "False/NodesInConflict",
				v1alpha1.ConditionComplete: "False/NodesInConflict"},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"n2 (also selected by pool-green, pool-red)"}}}},
		{name: "complete when every selected Node is updated", rollout: newRollout(),
			nodes: nodes(newNode("n1", on(v3)), newNode("n2", on(v3))),
			want: want{assign: []string{}, conditions: map[string]string{v1alpha1.ConditionProgressing: "False/Complete",
				v1alpha1.ConditionComplete: "True/AllNodesUpdated"}, counts: &[4]int32{2, 2, 0, 0}}},
		{name: "no Node selected", rollout: newRollout(),
			want: want{conditions: map[string]string{v1alpha1.ConditionProgressing: "False/NoNodesSelected", v1alpha1.ConditionComplete: "False/NoNodesSelected"}}},
		{name: "the target ConfigMap does not exist", rollout: newRollout(), missing: true,
			nodes: nodes(newNode("n1"), newNode("n2")),
			want: want{assign: []string{}, target: &contract.ConfigMapVersion{Namespace: v3.Namespace, Name: v3.Name},
				conditions: map[string]string{v1alpha1.ConditionProgressing: "False/TargetNotFound"}}},

		// Resuming.
		{name: "a Node that carries the target is not assigned it again", rollout: newRollout(maxUnavailable(intstr.FromInt32(3))),
			nodes: nodes(newNode("n1", assignedOnly(v3), movedFrom(nil)), newNode("n2")),
			want:  want{assign: []string{}, states: map[string]NodeState{"n1": StateInTrial}}},
		{name: "a Node without an agent report is in trial once assigned", rollout: newRollout(),
			nodes: nodes(newNode("n1", noAgent, assignedOnly(v3)), newNode("n2")),
			want:  want{assign: []string{}, states: map[string]NodeState{"n1": StateInTrial}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt) })
	}
}

func run(t *testing.T, tt testCase) {
	t.Helper()
	target := &v3
	if tt.target != nil {
		target = tt.target
	}
	if tt.missing {
		target = nil
	}
	before := tt.rollout.DeepCopy()
	d, err := Decide(Input{Rollout: tt.rollout, Target: target, Nodes: observe(t, tt.nodes), Refusals: tt.refusals, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !equalRollouts(before, tt.rollout) {
		t.Error("Decide modified its input")
	}
	w := tt.want
	if w.assign != nil {
		if got := changedNodes(d.Assign); !slices.Equal(got, w.assign) && !(len(got) == 0 && len(w.assign) == 0) {
			t.Errorf("assign %v, want %v", got, w.assign)
		}
	}
	if w.reverts != nil {
		got := map[string]*string{}
		for _, c := range d.Revert {
			got[c.Node] = c.Annotations[contract.ConfigSourceAnnotation]
		}
		if describe(got) != describe(w.reverts) {
			t.Errorf("reverts %s, want %s", describe(got), describe(w.reverts))
		}
	}
	for name, state := range w.states {
		i := slices.IndexFunc(d.Nodes, func(n NodeResult) bool { return n.Name == name })
		if i < 0 {
			t.Errorf("no verdict on %s", name)
		} else if d.Nodes[i].State != state {
			t.Errorf("%s is %s (%s), want %s", name, d.Nodes[i].State, d.Nodes[i].Detail, state)
		}
	}
	for name, detail := range w.details {
		i := slices.IndexFunc(d.Nodes, func(n NodeResult) bool { return n.Name == name })
		if i < 0 || d.Nodes[i].Detail != detail {
			t.Errorf("%s's detail is %q, want %q", name, detailOf(d, name), detail)
		}
	}
	for typ, wantCond := range w.conditions {
		c := meta.FindStatusCondition(d.Status.Conditions, typ)
		if c == nil {
			t.Errorf("no %s condition", typ)
		} else if got := string(c.Status) + "/" + c.Reason; got != wantCond {
			t.Errorf("%s = %s (%s), want %s", typ, got, c.Message, wantCond)
		}
	}
	for typ, parts := range w.messages {
		c := meta.FindStatusCondition(d.Status.Conditions, typ)
		for _, part := range parts {
			if c == nil || !strings.Contains(c.Message, part) {
				t.Errorf("%s message %q does not say %q", typ, messageOf(c), part)
			}
		}
	}
	if w.counts != nil {
		st := d.Status
		if got := [4]int32{st.Selected, st.Updated, st.InTrial, st.Failed}; got != *w.counts {
			t.Errorf("selected, updated, inTrial, failed = %v, want %v", got, *w.counts)
		}
	}
	if w.target != nil && (d.Status.Target == nil || *d.Status.Target != *w.target) {
		t.Errorf("status.target %+v, want %+v", d.Status.Target, *w.target)
	}
	checkInvariants(t, tt.rollout, d)
}

// checkInvariants holds for every decision: every condition is there and
// stamped, and no Node is both assigned and reverted.
func checkInvariants(t *testing.T, r *v1alpha1.KubeletConfigRollout, d Decision) {
	t.Helper()
	for _, typ := range []string{v1alpha1.ConditionProgressing, v1alpha1.ConditionComplete, v1alpha1.ConditionFailed, v1alpha1.ConditionPaused} {
		c := meta.FindStatusCondition(d.Status.Conditions, typ)
		if c == nil {
			t.Errorf("no %s condition", typ)
			continue
		}
		if c.LastTransitionTime.IsZero() || c.ObservedGeneration != r.Generation || c.Reason == "" || c.Message == "" {
			t.Errorf("%s condition incomplete: %+v", typ, *c)
		}
	}
	if d.Status.ObservedGeneration != r.Generation {
		t.Errorf("observedGeneration %d, want %d", d.Status.ObservedGeneration, r.Generation)
	}
	for _, a := range d.Assign {
		if slices.ContainsFunc(d.Revert, func(c Change) bool { return c.Node == a.Node }) {
			t.Errorf("%s is both assigned and reverted", a.Node)
		}
	}
}

func equalRollouts(a, b *v1alpha1.KubeletConfigRollout) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func describe(m map[string]*string) string {
	var parts []string
	for k, v := range m {
		value := "<removed>"
		if v != nil {
			value = fmt.Sprintf("%q", *v)
		}
		parts = append(parts, k+"="+value)
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func detailOf(d Decision, name string) string {
	for _, n := range d.Nodes {
		if n.Name == name {
			return n.Detail
		}
	}
	return "<no verdict>"
}

func messageOf(c *metav1.Condition) string {
	if c == nil {
		return "<no condition>"
	}
	return c.Message
}
