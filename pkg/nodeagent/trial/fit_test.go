package trial

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// heldFour are four pods of 300m cpu each, as a drain found them.
var heldFour = func() []corev1.ResourceList {
	var out []corev1.ResourceList
	for range 4 {
		out = append(out, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")})
	}
	return out
}()

// drained is the Node after a drain: its DaemonSet pods only, nothing for
// the other signals to see.
func drained(allocatable ...string) Snapshot {
	return snap(testNode([]string{"Ready=True"}, allocatable...))
}

func TestAfterDrain(t *testing.T) {
	cases := []struct {
		name   string
		held   AfterDrain
		looks  []Snapshot
		want   Outcome
		msg    string
		waived string
	}{{
		name:  "the pods fit again: passes",
		held:  AfterDrain{Requests: heldFour},
		looks: []Snapshot{drained("cpu=2", "pods=110"), drained("cpu=2", "pods=110")},
		want:  Pass,
	}, {
		name:  "maxPods below the pods it ran: fails naming pods and the shortfall",
		held:  AfterDrain{Requests: heldFour},
		looks: []Snapshot{drained("cpu=2", "pods=2"), drained("cpu=2", "pods=2")},
		want:  Fail,
		msg:   "after the drain the Node can no longer take back the 4 pods it ran before: pods: 4 requested, 2 allocatable, 2 short",
	}, {
		name:  "reservations that leave no room: fails naming cpu",
		held:  AfterDrain{Requests: heldFour},
		looks: []Snapshot{drained("cpu=50m", "pods=110"), drained("cpu=50m", "pods=110")},
		want:  Fail,
		msg:   "cpu: 1200m requested, 50m allocatable, 1150m short",
	}, {
		name:   "shrinking allowed: passes, saying what it found",
		held:   AfterDrain{Requests: heldFour, AllowShrink: true},
		looks:  []Snapshot{drained("cpu=2", "pods=2"), drained("cpu=2", "pods=2")},
		want:   Pass,
		waived: "the after-drain check was waived (allowShrink): the 4 pods it ran before the drain no longer fit its allocatable: pods: 4 requested, 2 allocatable, 2 short",
	}, {
		name:   "allowed, and it fits anyway",
		held:   AfterDrain{Requests: heldFour, AllowShrink: true},
		looks:  []Snapshot{drained("cpu=2", "pods=110")},
		want:   Pass,
		waived: "the after-drain check was waived (allowShrink): the 4 pods it ran before the drain fit its allocatable",
	}, {
		name:  "a shortfall the kubelet resolves within the grace: passes",
		held:  AfterDrain{Requests: heldFour},
		looks: []Snapshot{drained("cpu=2", "pods=2"), drained("cpu=2", "pods=110")},
		want:  Pass,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			terms := graceful
			terms.Grace = 2 * time.Minute
			tr := NewTracker(terms, 0)
			tr.SetAfterDrain(tc.held)
			tr.SetBaseline(drained("cpu=2", "pods=110"))
			// The first look just after the restart, the last when the
			// period is over: 30s of allocatable grace lie between them,
			// the kubelet's 2m do not.
			at := []time.Duration{time.Second, 10 * time.Minute}
			tr.Observe(nil)
			for i, s := range tc.looks {
				tr.ObserveNode(at[min(i, len(at)-1)], s)
			}
			v := tr.Verdict(0, 10*time.Minute)
			if v.Outcome != tc.want || !strings.Contains(v.Message, tc.msg) {
				t.Errorf("verdict %v %q, want %v %q", v.Outcome, v.Message, tc.want, tc.msg)
			}
			if got := tr.Waived(); got != tc.waived {
				t.Errorf("Waived() = %q, want %q", got, tc.waived)
			}
		})
	}
}

// TestAfterDrainExtendedResourceWaitsForItsPlugin: a device plugin
// registers again after the kubelet's restart, its resource zero until it
// does; a shortfall there holds the trial open for the kubelet's grace
// (2m here) rather than the allocatable grace (30s), and fails past it.
func TestAfterDrainExtendedResourceWaitsForItsPlugin(t *testing.T) {
	terms := graceful
	terms.Grace = 2 * time.Minute
	tr := NewTracker(terms, 0)
	tr.SetAfterDrain(AfterDrain{Requests: []corev1.ResourceList{{"example.com/gpu": resource.MustParse("1")}}})
	tr.Observe(nil)
	noGPU := drained("cpu=2", "pods=110", "example.com/gpu=0")
	tr.ObserveNode(time.Second, noGPU)
	tr.ObserveNode(90*time.Second, noGPU)
	if v := tr.Verdict(0, 90*time.Second); v.Outcome != Continue {
		t.Fatalf("within the kubelet's grace: %v %q, want Continue", v.Outcome, v.Message)
	}
	tr.ObserveNode(3*time.Minute, noGPU)
	if v := tr.Verdict(0, 10*time.Minute); v.Outcome != Fail || !strings.Contains(v.Message, "example.com/gpu: 1 requested, 0 allocatable, 1 short") {
		t.Fatalf("past the kubelet's grace: %v %q, want a failure naming the resource", v.Outcome, v.Message)
	}
}

func TestAfterDrainShortfallWithinGraceKeepsTheTrialOpen(t *testing.T) {
	tr := NewTracker(graceful, 0)
	tr.SetAfterDrain(AfterDrain{Requests: heldFour})
	tr.Observe(nil)
	tr.ObserveNode(10*time.Minute-time.Second, drained("cpu=2", "pods=2"))
	if v := tr.Verdict(0, 10*time.Minute); v.Outcome != Continue || !strings.Contains(v.Message, "room again for the pods it ran before the drain (pods)") {
		t.Errorf("verdict %v %q: a trial must not pass on a shortfall still within its grace", v.Outcome, v.Message)
	}
}

func TestResolve(t *testing.T) {
	tuning := NodeSignals{Ready: true, ReadyGrace: time.Minute, PressureConditions: DefaultPressureConditions,
		PodFailureReasons: DefaultPodFailureReasons, PodsStopped: true, Allocatable: true, AllocatableGrace: 30 * time.Second}
	base := Terms{Period: 5 * time.Minute, Grace: time.Minute, FailureThreshold: 3, Node: tuning}
	if got := Resolve(base, tuning, nil); got.Period != base.Period || !got.Node.Ready || len(got.Node.PressureConditions) != 3 {
		t.Errorf("no terms: %+v, want the agent's", got)
	}
	off, on, period := false, true, int32(90)
	got := Resolve(base, tuning, &contract.TrialTerms{PeriodSeconds: &period, Signals: &contract.TrialSignals{Pressure: &off, PodsStopped: &off}})
	if got.Period != 90*time.Second || len(got.Node.PressureConditions) != 0 || got.Node.PodsStopped || !got.Node.Ready || !got.Node.Allocatable {
		t.Errorf("period 90s, pressure and podsStopped off: %+v", got)
	}
	if len(base.Node.PressureConditions) != 3 {
		t.Error("Resolve changed the agent's terms")
	}
	// Turned on from an agent that has them off: the agent's tuning.
	quiet := Terms{Period: time.Minute, Grace: time.Minute, FailureThreshold: 3}
	got = Resolve(quiet, tuning, &contract.TrialTerms{Signals: &contract.TrialSignals{Pressure: &on, NodeReady: &on, Allocatable: &on}})
	if len(got.Node.PressureConditions) != 3 || !got.Node.Ready || got.Node.ReadyGrace != time.Minute || !got.Node.Allocatable || got.Node.AllocatableGrace != 30*time.Second {
		t.Errorf("turned on: %+v", got.Node)
	}
	// An agent that reads no pods keeps the pod signals off.
	noPods := tuning
	noPods.PodFailureReasons, noPods.PodsStopped, noPods.Allocatable = nil, false, false
	got = Resolve(quiet, noPods, &contract.TrialTerms{Signals: &contract.TrialSignals{PodFailures: &on, PodsStopped: &on, Allocatable: &on}})
	if got.Node.ReadsPods() {
		t.Errorf("pod signals on for an agent that reads no pods: %+v", got.Node)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("resolved terms invalid: %v", err)
	}
}
