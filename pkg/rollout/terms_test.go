package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// trialEnds: the rollout that moved the Node counts its trial as ending
// at t.
func trialEnds(t time.Time) nodeOpt {
	return func(n *corev1.Node) { n.Annotations[contract.TrialEndsAnnotation] = FormatTrialEnds(t) }
}

func withTrial(terms *contract.TrialTerms) rolloutOpt {
	return func(r *v1alpha1.KubeletConfigRollout) { r.Spec.Trial = terms }
}

func resultOf(d Decision, name string) NodeResult {
	for _, n := range d.Nodes {
		if n.Name == name {
			return n
		}
	}
	return NodeResult{}
}

// TestAnEarlyReportIsNotCountedUpdated: a canary whose agent reports the
// target passed the moment it was assigned is not counted updated before
// the rollout's trial period has passed since the assignment, whatever the
// agent says; the decision asks to look again when it has, and then it
// counts (and is marked), as a restarted controller reading the Node sees
// too. A Node the rollout did not move is counted as it reports.
func TestAnEarlyReportIsNotCountedUpdated(t *testing.T) {
	ends := now.Add(2 * time.Minute)
	r := newRollout(statusFor(v3))
	in := Input{Rollout: r, Target: &v3, Now: now,
		Nodes: observe(t, nodes(newNode("n1", on(v3), movedFrom(nil), trialEnds(ends)), newNode("n2")))}
	d := decide(t, in)
	n1 := resultOf(d, "n1")
	if n1.State != StateInTrial || !n1.Unavailable || !strings.Contains(n1.Detail, "counted updated once its trial period ends at "+FormatTrialEnds(ends)) {
		t.Errorf("n1 reporting updated early: %+v", n1)
	}
	if len(d.Assign) != 0 || len(d.Record) != 0 || d.Status.Updated != 0 {
		t.Errorf("an early report moved the pool on: assign %v, record %v, updated %d", changedNodes(d.Assign), changedNodes(d.Record), d.Status.Updated)
	}
	if d.RecheckAfter != 2*time.Minute {
		t.Errorf("RecheckAfter %v, want the 2m until its period ends", d.RecheckAfter)
	}

	in.Now = metav1.NewTime(ends)
	d = decide(t, in)
	if s := resultOf(d, "n1").State; s != StateUpdated || len(d.Assign) != 1 || d.Assign[0].Node != "n2" || len(d.Record) != 1 {
		t.Errorf("once the period is over: n1 %s, assign %v, record %v", s, changedNodes(d.Assign), changedNodes(d.Record))
	}

	// A Node assigned the target by someone else counts as it reports.
	in = Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, nodes(newNode("n1", on(v3), trialEnds(ends))))}
	if s := resultOf(decide(t, in), "n1").State; s != StateUpdated {
		t.Errorf("a Node this rollout did not move: %s", s)
	}
}

// TestAssignmentCarriesTheTerms: an assignment writes spec.trial,
// spec.drainOptions and the end of the trial period (spec.trial's, else
// Input.DefaultTrialPeriod); a revert removes them.
func TestAssignmentCarriesTheTerms(t *testing.T) {
	period := int32(45)
	off := false
	r := newRollout(withTrial(&contract.TrialTerms{PeriodSeconds: &period, Signals: &contract.TrialSignals{Pressure: &off}}), func(r *v1alpha1.KubeletConfigRollout) {
		r.Spec.DrainOptions = &contract.DrainOptions{DeleteEmptyDirData: true}
	})
	d := decide(t, Input{Rollout: r, Target: &v3, Now: now, Nodes: observe(t, nodes(newNode("n1")))})
	if len(d.Assign) != 1 {
		t.Fatalf("assign %v", changedNodes(d.Assign))
	}
	a := d.Assign[0].Annotations
	want := map[string]string{
		contract.TrialAnnotation:                   `{"periodSeconds":45,"signals":{"pressure":false}}`,
		contract.DrainDeleteEmptyDirDataAnnotation: "true",
		contract.TrialEndsAnnotation:               FormatTrialEnds(now.Add(45 * time.Second)),
	}
	for key, value := range want {
		if a[key] == nil || *a[key] != value {
			t.Errorf("%s = %v, want %q", key, a[key], value)
		}
	}
	if v, ok := a[contract.DrainForceAnnotation]; !ok || v != nil {
		t.Errorf("a switch that is off is not removed: %v", v)
	}

	d = decide(t, Input{Rollout: newRollout(), Target: &v3, Now: now, DefaultTrialPeriod: 10 * time.Minute, Nodes: observe(t, nodes(newNode("n1")))})
	a = d.Assign[0].Annotations
	if v, ok := a[contract.TrialAnnotation]; !ok || v != nil {
		t.Errorf("no spec.trial: %s = %v, want removed", contract.TrialAnnotation, v)
	}
	if v := a[contract.TrialEndsAnnotation]; v == nil || *v != FormatTrialEnds(now.Add(10*time.Minute)) {
		t.Errorf("trial ends %v, want the controller's default period after now", v)
	}
	for _, key := range []string{contract.TrialAnnotation, contract.DrainForceAnnotation, contract.DrainDeleteEmptyDirDataAnnotation, contract.TrialEndsAnnotation} {
		if v, ok := revert(&NodeObservation{Name: "n1"}).Annotations[key]; !ok || v != nil {
			t.Errorf("a revert does not remove %s", key)
		}
	}
}

// drainBlocked: the agent found pods it may not delete on the Node's
// drain for ref, and left ref unapplied.
func drainBlocked(ref contract.ConfigMapVersion, pods ...string) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations[contract.ConfigSourceAnnotation] = source(ref)
		reports(n, contract.ConfigStatus{Assigned: &ref, Error: "the drain it needs would delete pods that nothing brings back", PendingPods: pods},
			corev1.ConditionFalse, contract.ReasonDrainBlocked, "the drain it needs would delete pods that nothing brings back: default/notes (no controller recreates it)")
	}
}

func TestADrainBlockedFailsTheRollout(t *testing.T) {
	for _, policy := range []v1alpha1.FailurePolicy{v1alpha1.FailureRevert, v1alpha1.FailureHalt} {
		r := newRollout(statusFor(v3), func(r *v1alpha1.KubeletConfigRollout) { r.Spec.OnFailure = policy })
		d := decide(t, Input{Rollout: r, Target: &v3, Now: now,
			Nodes: observe(t, nodes(newNode("n1", drainBlocked(v3, "default/notes", "default/cache"), movedFrom(nil)), newNode("n2")))})
		failed := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionFailed)
		if failed == nil || failed.Status != metav1.ConditionTrue || failed.Reason != v1alpha1.ReasonDrainBlocked ||
			!strings.Contains(failed.Message, "Node n1") || !strings.Contains(failed.Message, "default/cache") {
			t.Errorf("%s: Failed %+v, want DrainBlocked naming the Node and the pods", policy, failed)
		}
		if len(d.Assign) != 0 || (policy == v1alpha1.FailureRevert) != (len(d.Revert) == 1) {
			t.Errorf("%s: assign %v revert %v", policy, changedNodes(d.Assign), changedNodes(d.Revert))
		}
	}
}

func capacity(pairs ...string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{}
		for i := 0; i < len(pairs); i += 2 {
			n.Status.Capacity[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
	}
}

// TestUnfitNodesAreReported: the Nodes the target would leave unable to
// hold their pods are reported before anything moves, each by its own
// capacity, and moving on goes on.
func TestUnfitNodesAreReported(t *testing.T) {
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{MaxPods: 2, KubeReserved: map[string]string{"cpu": "1950m"}}
	big := newNode("big", capacity("cpu", "64", "memory", "256Gi", "pods", "110"))
	small := newNode("small", capacity("cpu", "2", "memory", "8Gi", "pods", "110"))
	pods := []corev1.ResourceList{{corev1.ResourceCPU: resource.MustParse("100m")}, {corev1.ResourceCPU: resource.MustParse("100m")}}
	unfit := map[string]string{}
	for _, n := range []*corev1.Node{big, small} {
		why, err := WouldNotFit(cfg, n, pods)
		if err != nil {
			t.Fatal(err)
		}
		if why != "" {
			unfit[n.Name] = why
		}
	}
	if _, ok := unfit["big"]; ok || !strings.Contains(unfit["small"], "cpu: 200m requested, 50m allocatable, 150m short") {
		t.Fatalf("unfit %v", unfit)
	}
	d := decide(t, Input{Rollout: newRollout(withTrial(&contract.TrialTerms{AllowShrink: true})), Target: &v3, Now: now, Unfit: unfit,
		Nodes: observe(t, nodes(big, small))})
	if len(d.Status.UnfitNodes) != 1 || d.Status.UnfitNodes[0].Name != "small" || len(d.Assign) != 1 {
		t.Errorf("unfit %+v, assign %v", d.Status.UnfitNodes, changedNodes(d.Assign))
	}
	progressing := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing)
	if !strings.Contains(progressing.Message, "1 Nodes the target would leave unable to hold their pods (spec.trial.allowShrink") {
		t.Errorf("Progressing %q", progressing.Message)
	}
}

// A trial's end is written to the millisecond, never before the period is
// over, and read back as written.
func TestTrialEndsToTheMillisecond(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123_400_000, time.FixedZone("x", 3600))
	got := FormatTrialEnds(at)
	if got != "2030-01-02T02:04:05.124Z" {
		t.Errorf("FormatTrialEnds(%v) = %s, want 2030-01-02T02:04:05.124Z (UTC, rounded up)", at, got)
	}
	if exact := at.Truncate(time.Millisecond); FormatTrialEnds(exact) != "2030-01-02T02:04:05.123Z" {
		t.Errorf("a whole millisecond moved: %s", FormatTrialEnds(exact))
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{contract.TrialEndsAnnotation: got}}}
	obs, err := ObserveNode(node, nil)
	if err != nil || !obs.TrialEnds.Equal(at.Truncate(time.Millisecond).Add(time.Millisecond)) {
		t.Errorf("read back %v (%v)", obs.TrialEnds, err)
	}
	// A value written to the second, as earlier controllers did, still reads.
	node.Annotations[contract.TrialEndsAnnotation] = "2030-01-02T02:04:06Z"
	if obs, err := ObserveNode(node, nil); err != nil || obs.TrialEnds.Second() != 6 {
		t.Errorf("a whole-second value read as %v (%v)", obs.TrialEnds, err)
	}
}
