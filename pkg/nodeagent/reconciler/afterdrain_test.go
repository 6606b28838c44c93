package reconciler

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/drain"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

// maxPodsTwo shrinks what the Node holds: a drain by the classification.
const maxPodsTwo = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 2\n"

var (
	cmSmall  = configMap("small", "u-small", "1", maxPodsTwo)
	cmStatic = configMap("static", "u-s", "1", staticCPU)
)

func withCPU(p *corev1.Pod, cpu string) *corev1.Pod {
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	return p
}

func daemon(name string) *corev1.Pod {
	p := replicated(name)
	p.OwnerReferences[0].Kind = "DaemonSet"
	return p
}

func bare(name string) *corev1.Pod {
	p := replicated(name)
	p.OwnerReferences = nil
	return p
}

func withEmptyDir(p *corev1.Pod) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return p
}

// allocatable sets what the Node reports, as the kubelet would after its
// restart.
func (d *fakeDrainer) allocatable(pairs ...string) {
	d.node = d.node.DeepCopy()
	d.node.Status.Allocatable = corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		d.node.Status.Allocatable[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
}

func (d *fakeDrainer) annotate(kv ...string) {
	d.node = d.node.DeepCopy()
	if d.node.Annotations == nil {
		d.node.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		d.node.Annotations[kv[i]] = kv[i+1]
	}
}

// heldNode is a Node running four web pods of 300m and a DaemonSet pod,
// with room for 110 pods and 2 CPUs.
func heldNode(t *testing.T) (*env, *fakeDrainer, *[]string) {
	e, d, log := newDrainEnv(t)
	for _, name := range []string{"web-0", "web-1", "web-2", "web-3"} {
		d.pods = append(d.pods, withCPU(replicated(name), "300m"))
	}
	d.pods = append(d.pods, withCPU(daemon("agent"), "100m"))
	d.allocatable("pods", "110", "cpu", "2")
	return e, d, log
}

// drainAndRestart takes a change through its drain and its restart, and
// has the Node report allocatable afterwards.
func drainAndRestart(t *testing.T, e *env, d *fakeDrainer, cm *corev1.ConfigMap, allocatable ...string) Result {
	t.Helper()
	e.sync(d.online(cm)) // cordoned, evicted: Restarting
	r := e.sync(d.online(cm))
	if e.restarter.count != 1 || r.Report.Status.Phase != contract.PhaseTrialInProgress {
		t.Fatalf("after the drain: %d restarts, phase %q (%s)", e.restarter.count, r.Report.Status.Phase, r.Report.Condition.Message)
	}
	d.allocatable(allocatable...)
	return r
}

// TestTrialAfterDrainJudgesWhatTheNodeHeld: maxPods 2 on a Node that ran
// five pods is drained and restarted; judged on the emptied Node, every
// other signal would pass it. The trial holds it to the pods the Node ran
// before: it fails naming pods and the shortfall, goes back to the local
// configuration, and the Node is uncordoned.
func TestTrialAfterDrainJudgesWhatTheNodeHeld(t *testing.T) {
	e, d, _ := heldNode(t)
	cm := configMap("small", "u-small", "1", maxPodsTwo)
	drainAndRestart(t, e, d, cm, "pods", "2", "cpu", "2")
	if got := len(d.pods); got != 1 {
		t.Fatalf("%d pods left on the drained Node, want the DaemonSet's", got)
	}
	r := e.sync(d.online(cm))
	if !hasEvent(r, contract.ReasonRolledBack) {
		t.Fatalf("the trial did not fail: %+v", r.Report.Condition)
	}
	want := "after the drain the Node can no longer take back the 5 pods it ran before: pods: 5 requested, 2 allocatable, 3 short"
	if !strings.Contains(r.Report.Status.Error, want) || r.Report.Condition.Reason != contract.ReasonRolledBack {
		t.Errorf("status %s %q, want RolledBack naming %q", r.Report.Condition.Reason, r.Report.Status.Error, want)
	}
	e.sync(d.online(cm))
	if strings.Contains(e.kubeletFile(), "maxPods") || d.node.Spec.Unschedulable || drain.CordonedByAgent(d.node) {
		t.Errorf("after the rollback: file %q, cordoned %v", e.kubeletFile(), d.node.Spec.Unschedulable)
	}
}

func TestTrialAfterDrainNamesCPU(t *testing.T) {
	e, d, _ := heldNode(t)
	cm := configMap("reserved", "u-r", "1", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeReserved:\n  cpu: 1950m\n")
	drainAndRestart(t, e, d, cm, "pods", "110", "cpu", "50m")
	r := e.sync(d.online(cm))
	if want := "cpu: 1300m requested, 50m allocatable, 1250m short"; !strings.Contains(r.Report.Status.Error, want) {
		t.Errorf("status %q, want %q", r.Report.Status.Error, want)
	}
}

// TestShrinkAllowedPassesAndSaysSo: the same change, its assignment
// allowing it to shrink the Node, passes; the status says the check was
// waived and what it found, also after the agent restarts.
func TestShrinkAllowedPassesAndSaysSo(t *testing.T) {
	e, d, _ := heldNode(t)
	d.annotate(contract.TrialAnnotation, `{"allowShrink":true}`)
	cm := configMap("small", "u-small", "1", maxPodsTwo)
	drainAndRestart(t, e, d, cm, "pods", "2", "cpu", "2")
	r := e.sync(d.online(cm))
	if !strings.Contains(r.Report.Status.Waived, "pods: 5 requested, 2 allocatable") || !strings.Contains(r.Report.Condition.Message, "waived") {
		t.Errorf("during the trial: waived %q, message %q", r.Report.Status.Waived, r.Report.Condition.Message)
	}
	r = e.passTrial(d.online(cm))
	ref := refOf(cm)
	e.check(r, expect{ready: corev1.ConditionTrue, reason: contract.ReasonConfigActive, assigned: ref, active: ref, lkg: ref, restarts: 1, fileHas: "maxPods: 2"})
	want := "the after-drain check was waived (allowShrink): the 5 pods it ran before the drain no longer fit its allocatable: pods: 5 requested, 2 allocatable, 3 short"
	if r.Report.Status.Waived != want || !strings.Contains(r.Report.Condition.Message, want) {
		t.Errorf("passed: waived %q, message %q; want %q", r.Report.Status.Waived, r.Report.Condition.Message, want)
	}
	e.startAgent()
	if r = e.sync(d.online(cm)); r.Report.Status.Waived != want {
		t.Errorf("after the agent's restart: waived %q", r.Report.Status.Waived)
	}
}

// TestWhatTheNodeHeldSurvivesAnAgentRestart: an agent restarted between
// the kubelet's restart and the verdict judges by the pods the first one
// recorded, which the drained Node no longer shows.
func TestWhatTheNodeHeldSurvivesAnAgentRestart(t *testing.T) {
	e, d, _ := heldNode(t)
	cm := configMap("small", "u-small", "1", maxPodsTwo)
	drainAndRestart(t, e, d, cm, "pods", "2", "cpu", "2")
	e.startAgent()
	r := e.sync(d.online(cm))
	if !strings.Contains(r.Report.Status.Error, "pods: 5 requested, 2 allocatable") {
		t.Errorf("the restarted agent judged %+v (%q)", r.Report.Condition, r.Report.Status.Error)
	}
}

// TestProtectedPodsBlockTheDrain: a pod no controller recreates, and one
// with emptyDir data, block the drain before anything is evicted; the
// Node is uncordoned and nothing changes until the Node's switches allow
// deleting them, one switch for each.
func TestProtectedPodsBlockTheDrain(t *testing.T) {
	e, d, log := newDrainEnv(t, "web-0")
	d.pods = append(d.pods, bare("notes"), withEmptyDir(replicated("cache")), daemon("agent"))
	cm := configMap("static", "u-s", "1", staticCPU)
	r := e.sync(d.online(cm))
	e.check(r, expect{ready: corev1.ConditionFalse, reason: contract.ReasonDrainBlocked, errorHas: "nothing was evicted", assigned: refOf(cm), restarts: 0})
	if !slices.Equal(r.Report.Status.PendingPods, []string{"default/cache", "default/notes"}) {
		t.Errorf("pendingPods %v, want the two protected pods", r.Report.Status.PendingPods)
	}
	if !slices.Equal(*log, []string{"cordon", "uncordon"}) || len(d.pods) != 4 {
		t.Errorf("steps %v, %d pods left: want the cordon lifted and nothing evicted", *log, len(d.pods))
	}
	for _, want := range []string{contract.DrainForceAnnotation, contract.DrainDeleteEmptyDirDataAnnotation} {
		if !strings.Contains(r.Report.Status.Error, want) {
			t.Errorf("status %q does not name the switch %s", r.Report.Status.Error, want)
		}
	}
	if !hasEvent(r, contract.ReasonDrainBlocked) {
		t.Error("no DrainBlocked event")
	}

	// Not retried as it is.
	*log = nil
	if r = e.sync(d.online(cm)); len(*log) != 0 || r.Report.Condition.Reason != contract.ReasonDrainBlocked {
		t.Errorf("the next pass: %v, %s", *log, r.Report.Condition.Reason)
	}

	// --force alone: the emptyDir pod still blocks it.
	d.annotate(contract.DrainForceAnnotation, "true")
	r = e.sync(d.online(cm))
	if !slices.Equal(r.Report.Status.PendingPods, []string{"default/cache"}) || r.Report.Condition.Reason != contract.ReasonDrainBlocked {
		t.Errorf("with %s: %s, pending %v", contract.DrainForceAnnotation, r.Report.Condition.Reason, r.Report.Status.PendingPods)
	}

	// Both: evicted, the DaemonSet pod stays.
	d.annotate(contract.DrainDeleteEmptyDirDataAnnotation, "true")
	*log = nil
	e.sync(d.online(cm))
	e.sync(d.online(cm))
	for _, want := range []string{"evict web-0", "evict notes", "evict cache"} {
		if !slices.Contains(*log, want) {
			t.Errorf("steps %v lack %q", *log, want)
		}
	}
	if slices.Contains(*log, "evict agent") || e.restarter.count != 1 {
		t.Errorf("steps %v, %d restarts: want the DaemonSet pod kept and the change applied", *log, e.restarter.count)
	}
}

// TestInvalidSwitchDeletesNothing: a switch that is not "true" or "false"
// is warned about and deletes nothing.
func TestInvalidSwitchDeletesNothing(t *testing.T) {
	e, d, log := newDrainEnv(t)
	d.pods = append(d.pods, bare("notes"))
	d.annotate(contract.DrainForceAnnotation, "yes")
	r := e.sync(d.online(configMap("static", "u-s", "1", staticCPU)))
	if r.Report.Condition.Reason != contract.ReasonDrainBlocked || slices.Contains(*log, "evict notes") || !hasEvent(r, contract.ReasonAssignmentInvalid) {
		t.Errorf("%s, steps %v, events %v", r.Report.Condition.Reason, *log, r.Events)
	}
}

// TestAssignmentsTrialTerms: the Node's nodeguard.dev/trial gives the
// trial its period and turns a signal off; the terms recorded when the
// trial started judge it to the end, through an agent's restart and an
// edit of the annotation.
func TestAssignmentsTrialTerms(t *testing.T) {
	e := newEnv(t)
	tuning := trial.NodeSignals{PressureConditions: trial.DefaultPressureConditions}
	terms := testTerms
	terms.Node = tuning
	e.terms, e.tuning = &terms, tuning
	e.startAgent()
	d := newFakeDrainer(&[]string{})
	d.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}
	e.settle(func() Observation { return d.online(nil) })

	d.annotate(contract.TrialAnnotation, `{"periodSeconds":60,"signals":{"pressure":false}}`)
	cm := configMap("a", "u-a", "1", goodA)
	r := e.sync(d.online(cm))
	if !strings.Contains(r.Report.Condition.Message, "on trial since") || !strings.Contains(r.Report.Condition.Message, "for 1m0s") {
		t.Errorf("trial message %q, want its own period", r.Report.Condition.Message)
	}
	if tr, err := e.store().Trial(); err != nil || tr == nil || tr.Terms == nil || *tr.Terms.PeriodSeconds != 60 {
		t.Fatalf("trial record %+v, %v: want the terms kept", tr, err)
	}
	// Pressure is off for this trial; an edit of the annotation and an
	// agent's restart change nothing.
	d.node.Status.Conditions[0].Status = corev1.ConditionTrue
	delete(d.node.Annotations, contract.TrialAnnotation)
	e.startAgent()
	e.clock.Step(10 * time.Second)
	e.sync(d.online(cm))
	e.clock.Step(50 * time.Second)
	r = e.sync(d.online(cm))
	if !hasEvent(r, contract.EventTrialPassed) {
		t.Errorf("after its own 60s: %+v; want passed, the pressure not judged", r.Report.Condition)
	}

	// The agent's terms for the next one: 10m, pressure on.
	d.node.Status.Conditions[0].Status = corev1.ConditionFalse
	b := configMap("b", "u-b", "1", goodB)
	e.sync(d.online(b))
	d.node.Status.Conditions[0].Status = corev1.ConditionTrue
	e.clock.Step(testProbePeriod)
	r = e.sync(d.online(b))
	if !hasEvent(r, contract.ReasonRolledBack) || !strings.Contains(r.Report.Status.Error, "MemoryPressure") {
		t.Errorf("the agent's own terms: %+v %q; want MemoryPressure to fail it", r.Report.Condition, r.Report.Status.Error)
	}
}

// TestInvalidTrialTermsAreWarnedOnce: a nodeguard.dev/trial that does not
// decode is warned about once, and the agent's terms apply.
func TestInvalidTrialTermsAreWarnedOnce(t *testing.T) {
	e, d, _ := newDrainEnv(t)
	d.annotate(contract.TrialAnnotation, `{"periodSeconds":"soon"}`)
	cm := configMap("a", "u-a", "1", goodA)
	warnings := 0
	for range 3 {
		r := e.sync(d.online(cm))
		for _, ev := range r.Events {
			if ev.Reason == contract.ReasonAssignmentInvalid {
				warnings++
			}
		}
		if !strings.Contains(r.Report.Condition.Message, "for 10m0s") {
			t.Errorf("message %q, want the agent's period", r.Report.Condition.Message)
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings, want 1", warnings)
	}
}
