package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// passedOn: the rollout recorded the Node passing its trial on ref.
func passedOn(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) { n.Annotations[contract.TrialPassedAnnotation] = TrialPassedValue(ref) }
}

// Only a Node this rollout moved, in its trial on the target, fails the
// pool: anything else a Node says of itself is shown for it alone.
func TestFailureScope(t *testing.T) {
	tests := []testCase{
		{name: "a Node that failed after passing its trial fails nothing", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", rolledBack(v3), movedFrom(nil), passedOn(v3)), newNode("n2", on(v3), movedFrom(nil), passedOn(v3)), newNode("n3")),
			want: want{assign: []string{"n3"}, reverts: map[string]*string{}, states: map[string]NodeState{"n1": StateDegraded},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure", v1alpha1.ConditionProgressing: "True/RollingOut"},
				messages:   map[string][]string{v1alpha1.ConditionProgressing: {"n1 (reports kubelet-configs/pool-blue-v3 (resourceVersion 30) failed (TrialFailed: kubelet unhealthy) outside a trial"}},
				counts:     &[4]int32{3, 1, 0, 1}}},
		{name: "a failure after Complete reverts nothing, and is a state of its own", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", on(v3), movedFrom(nil), passedOn(v3)), newNode("n2", invalid(v3), movedFrom(nil), passedOn(v3))),
			want: want{reverts: map[string]*string{}, states: map[string]NodeState{"n2": StateDegraded},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure", v1alpha1.ConditionComplete: "False/NodesDegraded",
					v1alpha1.ConditionProgressing: "False/NodesDegraded"},
				messages: map[string][]string{v1alpha1.ConditionProgressing: {"every Node this rollout may move took", "1 of them degraded since", "n2 (reports"}}}},
		{name: "drift after Complete: Degraded, never a failure of the pool", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", on(v3), movedFrom(nil), passedOn(v3)), newNode("n2", driftedOn(v3), movedFrom(nil), passedOn(v3))),
			want: want{reverts: map[string]*string{}, assign: []string{}, states: map[string]NodeState{"n1": StateUpdated, "n2": StateDegraded},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure", v1alpha1.ConditionProgressing: "False/NodesDegraded"},
				counts:     &[4]int32{2, 1, 0, 1},
				details: map[string]string{"n2": "took kubelet-configs/pool-blue-v3 (resourceVersion 30), and its kubelet no longer runs it as applied " +
					"(ConfigDrifted: maxPods: 150 asked, 20 running (set by the kubelet's command line: --max-pods=20))"}}},
		{name: "drift during the canary's trial record fails nothing", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", driftedOn(v3), movedFrom(nil)), newNode("n2")),
			want: want{reverts: map[string]*string{}, assign: []string{}, states: map[string]NodeState{"n1": StateDegraded, "n2": StatePending},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure", v1alpha1.ConditionProgressing: "True/Canary"}}},
		{name: "a Node another rollout moved fails nothing", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", rolledBack(v3), movedByFrom("pool-green", nil)), newNode("n2", on(v3)), newNode("n3")),
			want: want{assign: []string{"n3"}, states: map[string]NodeState{"n1": StateDegraded},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"}}},
		{name: "a Node assigned by hand fails nothing", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes: nodes(newNode("n1", rolledBack(v3)), newNode("n2")),
			want: want{assign: []string{"n2"}, states: map[string]NodeState{"n1": StateDegraded},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure"}}},
		{name: "a pass recorded for an earlier version does not shield a new one", rollout: newRollout(statusFor(v3b)),
			target: &v3b,
			nodes:  nodes(newNode("n1", rolledBack(v3b), movedFrom(nil), passedOn(v3)), newNode("n2")),
			want: want{reverts: map[string]*string{"n1": nil}, states: map[string]NodeState{"n1": StateReverting},
				conditions: map[string]string{v1alpha1.ConditionFailed: "True/TrialFailed"}}},
		{name: "a Degraded Node counts against maxUnavailable", rollout: newRollout(statusFor(v3)),
			nodes: nodes(newNode("n1", rolledBack(v3), movedFrom(nil), passedOn(v3)), newNode("n2")),
			want:  want{assign: []string{}, messages: map[string][]string{v1alpha1.ConditionProgressing: {"1 unavailable (at most 1)", "n1 (reports"}}}},

		// Refusals that concern one Node's own state.
		{name: "a Node refused for its own state is skipped and the others go on", rollout: newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(2))),
			nodes:    nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2"), newNode("n3")),
			refusals: []Refusal{{Node: "n2", Message: "rule 5: kubelet v1.33 does not know gate Foo", NodeState: true}},
			want: want{assign: []string{"n3"}, reverts: map[string]*string{}, states: map[string]NodeState{"n2": StateSkipped},
				conditions: map[string]string{v1alpha1.ConditionFailed: "False/NoFailure", v1alpha1.ConditionProgressing: "True/RollingOut"},
				messages:   map[string][]string{v1alpha1.ConditionProgressing: {"1 Nodes skipped", "n2"}}}},
		{name: "every Node left skipped", rollout: newRollout(statusFor(v3)),
			nodes:    nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2")),
			refusals: []Refusal{{Node: "n2", Message: "policy pool_naming: no", NodeState: true}},
			want: want{assign: []string{}, conditions: map[string]string{v1alpha1.ConditionProgressing: "False/NodesSkipped",
				v1alpha1.ConditionComplete: "False/NodesSkipped", v1alpha1.ConditionFailed: "False/NoFailure"}}},
		{name: "a refusal of the target itself still fails the pool", rollout: newRollout(statusFor(v3)),
			nodes:    nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2")),
			refusals: []Refusal{{Node: "n2", Message: "rule 6"}},
			want:     want{reverts: map[string]*string{"n1": nil}, conditions: map[string]string{v1alpha1.ConditionFailed: "True/AssignmentRefused"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt) })
	}
}

func TestSkippedNodesAreKeptForTheTargetAndGeneration(t *testing.T) {
	r := newRollout(statusFor(v3))
	in := Input{Rollout: r, Target: &v3, Now: now,
		Nodes:    observe(t, nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2"), newNode("n3"))),
		Refusals: []Refusal{{Node: "n2", Message: "rule 5: too old", NodeState: true}}}
	d, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []v1alpha1.SkippedNode{{Name: "n2", Message: "rule 5: too old"}}; !slices.Equal(d.Status.SkippedNodes, want) {
		t.Fatalf("skippedNodes %v, want %v", d.Status.SkippedNodes, want)
	}
	// The next decision reads the skip from the status alone.
	r.Status = d.Status
	in.Refusals = nil
	if d, err = Decide(in); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(d, "n2"); got != StateSkipped {
		t.Errorf("n2 is %s after the status was written, want Skipped", got)
	}
	// An edit of the spec tries it again.
	r.Generation++
	if d, err = Decide(in); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(d, "n2"); got == StateSkipped {
		t.Errorf("n2 still skipped after an edit of the spec")
	}
	// So does a new target.
	r.Generation--
	in.Target = &v3b
	if d, err = Decide(in); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(d, "n2"); got == StateSkipped {
		t.Errorf("n2 still skipped for a new version of the target")
	}
}

func TestAPassedTrialIsRecordedOnTheNodesTheRolloutMoved(t *testing.T) {
	r := newRollout(statusFor(v3), maxUnavailable(intstr.FromInt32(3)))
	d, err := Decide(Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, nodes(
		newNode("n1", on(v3), movedFrom(nil)),                 // passed, not yet recorded
		newNode("n2", on(v3), movedFrom(nil), passedOn(v3)),   // recorded
		newNode("n3", on(v3)),                                 // not this rollout's
		newNode("n4", trying(v3), movedFrom(nil)),             // in trial
		newNode("n5", on(v3), movedFrom(nil), passedOn(v2)))), // a pass of another version
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := changedNodes(d.Record); !slices.Equal(got, []string{"n1", "n5"}) {
		t.Fatalf("recorded %v, want [n1 n5]", got)
	}
	for _, c := range d.Record {
		if v := c.Annotations[contract.TrialPassedAnnotation]; v == nil || *v != "kubelet-configs/pool-blue-v3@30" || len(c.Annotations) != 1 {
			t.Errorf("record of %s is %v, want only %s=kubelet-configs/pool-blue-v3@30", c.Node, c.Annotations, contract.TrialPassedAnnotation)
		}
	}
	// A failed rollout records nothing: it is reverting.
	failed := newRollout(failedFor(v3, "n4"))
	if d, err = Decide(Input{Rollout: failed, Target: &v3, Now: now, Nodes: observe(t, nodes(newNode("n1", on(v3), movedFrom(nil))))}); err != nil {
		t.Fatal(err)
	}
	if len(d.Record) != 0 {
		t.Errorf("a failed rollout recorded %v", changedNodes(d.Record))
	}
	// An assignment and a revert clear the mark.
	for _, c := range []Change{mustAssign(t, &NodeObservation{Name: "n"}, spec{}, now.Time), revert(&NodeObservation{Name: "n"})} {
		if v, ok := c.Annotations[contract.TrialPassedAnnotation]; !ok || v != nil {
			t.Errorf("change %v does not remove %s", c.Annotations, contract.TrialPassedAnnotation)
		}
	}
}

// driftedOn: the Node took ref and passed its trial; its kubelet no longer
// runs it as applied.
func driftedOn(ref contract.ConfigMapVersion) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		message := "maxPods: 150 asked, 20 running (set by the kubelet's command line: --max-pods=20)"
		reports(n, contract.ConfigStatus{Assigned: &ref, Active: &ref, LastKnownGood: &ref, Error: message,
			Running: &contract.RunningConfig{State: contract.RunningDiffers}}, corev1.ConditionFalse, contract.ReasonConfigDrifted, message)
	}
}

func TestProgressDeadline(t *testing.T) {
	deadline := func(s int32) rolloutOpt {
		return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.ProgressDeadlineSeconds = &s }
	}
	progressedAt := func(at metav1.Time, updated int32) rolloutOpt {
		return func(r *v1alpha1.KubeletConfigRollout) {
			r.Status.LastProgressTime = &at
			r.Status.Updated = updated
			r.Status.ObservedGeneration = r.Generation
		}
	}
	stalled := nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2", trying(v3), movedFrom(nil)), newNode("n3"))
	earlier := metav1.NewTime(now.Add(-time.Minute))

	// Within the deadline: rolling out, decided again when it falls due.
	r := newRollout(statusFor(v3), deadline(120), progressedAt(earlier, 1))
	d := decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, stalled)})
	if got := reasonOf(d, v1alpha1.ConditionProgressing); got != "True/RollingOut" {
		t.Errorf("Progressing %s within the deadline, want True/RollingOut", got)
	}
	if d.RecheckAfter != time.Minute {
		t.Errorf("RecheckAfter %v, want 1m", d.RecheckAfter)
	}
	if !d.Status.LastProgressTime.Equal(&earlier) {
		t.Errorf("lastProgressTime %v, want %v kept", d.Status.LastProgressTime, earlier)
	}

	// Past it: Progressing=False, nothing reverted, nothing else changes.
	r = newRollout(statusFor(v3), deadline(30), progressedAt(earlier, 1))
	d = decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, stalled)})
	if got := reasonOf(d, v1alpha1.ConditionProgressing); got != "False/ProgressDeadlineExceeded" {
		t.Errorf("Progressing %s past the deadline, want False/ProgressDeadlineExceeded", got)
	}
	if c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing); !strings.Contains(c.Message, "waiting on n2") {
		t.Errorf("Progressing message %q does not name the Node waited on", c.Message)
	}
	if len(d.Revert) != 0 || reasonOf(d, v1alpha1.ConditionFailed) != "False/NoFailure" {
		t.Errorf("the deadline reverted %v or failed the rollout (%s)", changedNodes(d.Revert), reasonOf(d, v1alpha1.ConditionFailed))
	}

	// A Node newly updated is progress.
	moved := nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n2", on(v3), movedFrom(nil)), newNode("n3", notReady))
	d = decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, moved)})
	if got := reasonOf(d, v1alpha1.ConditionProgressing); got != "True/RollingOut" || !d.Status.LastProgressTime.Equal(&now) {
		t.Errorf("after a Node was updated: Progressing %s, lastProgressTime %v; want True/RollingOut, %v", got, d.Status.LastProgressTime, now)
	}

	// A rollout whose Nodes all took the target, one degraded since, is
	// stopped on its own, not stuck: no deadline.
	degraded := nodes(newNode("n1", on(v3), movedFrom(nil), passedOn(v3)), newNode("n2", driftedOn(v3), movedFrom(nil), passedOn(v3)))
	d = decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, degraded)})
	if got := reasonOf(d, v1alpha1.ConditionProgressing); got != "False/NodesDegraded" || d.RecheckAfter != 0 {
		t.Errorf("all taken, one degraded, past the deadline: Progressing %s, RecheckAfter %v; want False/NodesDegraded and no deadline", got, d.RecheckAfter)
	}

	// So is an assignment; and a paused or complete rollout has no deadline.
	d = decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, nodes(newNode("n1", on(v3), movedFrom(nil)), newNode("n3")))})
	if got := reasonOf(d, v1alpha1.ConditionProgressing); got != "True/RollingOut" || len(d.Assign) != 1 {
		t.Errorf("an assignment: Progressing %s, assigned %v", got, changedNodes(d.Assign))
	}
	pausedLong := newRollout(statusFor(v3), deadline(30), progressedAt(earlier, 1), paused())
	if d = decide(t, Input{Rollout: pausedLong, Target: &v3, Now: now, Nodes: observe(t, stalled)}); reasonOf(d, v1alpha1.ConditionProgressing) != "False/Paused" || d.RecheckAfter != 0 {
		t.Errorf("paused: Progressing %s, RecheckAfter %v", reasonOf(d, v1alpha1.ConditionProgressing), d.RecheckAfter)
	}

	// The default is ten minutes.
	r = newRollout(statusFor(v3), progressedAt(metav1.NewTime(now.Add(-9*time.Minute)), 1))
	if d = decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, stalled)}); d.RecheckAfter != time.Minute {
		t.Errorf("default deadline: RecheckAfter %v, want 1m", d.RecheckAfter)
	}
}

func TestAnIneligibleTargetIsNotReportedMissing(t *testing.T) {
	d := decide(t, Input{Rollout: newRollout(), TargetIneligible: true, Now: now, Nodes: observe(t, nodes(newNode("n1")))})
	c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing)
	if c == nil || c.Reason != v1alpha1.ReasonTargetNotEligible || !strings.Contains(c.Message, contract.EligibleLabel) {
		t.Errorf("Progressing %v, want reason TargetNotEligible naming the label %s", c, contract.EligibleLabel)
	}
	if len(d.Assign) != 0 {
		t.Errorf("assigned %v", changedNodes(d.Assign))
	}
}

func decide(t *testing.T, in Input) Decision {
	t.Helper()
	d, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func reasonOf(d Decision, typ string) string {
	c := meta.FindStatusCondition(d.Status.Conditions, typ)
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

func stateOf(d Decision, name string) NodeState {
	for _, n := range d.Nodes {
		if n.Name == name {
			return n.State
		}
	}
	return ""
}
