package trial

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var signalsTerms = Terms{Period: 10 * time.Minute, Grace: time.Minute, FailureThreshold: 3, Node: NodeSignals{
	Ready: true, ReadyGrace: time.Minute, PressureConditions: DefaultPressureConditions,
	PodFailureReasons: DefaultPodFailureReasons, PodsStopped: true, Allocatable: true,
}}

// graceful waits 30s before it holds a shortfall against the trial.
var graceful = func() Terms {
	p := signalsTerms
	p.Node.AllocatableGrace = 30 * time.Second
	return p
}()

var (
	shortNode    = testNode([]string{"Ready=True"}, "cpu=100m", "pods=110")
	notReadyNode = testNode([]string{"Ready=False", "MemoryPressure=False"}, "cpu=2", "memory=4Gi", "pods=110")
	pressureNode = testNode([]string{"Ready=True", "MemoryPressure=True"}, "cpu=2", "memory=4Gi", "pods=110")
	runningPod   = testPod("a", corev1.PodRunning, "", "500m")
	rejectedPod  = testPod("a", corev1.PodFailed, "OutOfpods", "500m")
)

func TestTrackerNodeSignals(t *testing.T) {
	type look struct {
		at   time.Duration // since boot
		snap Snapshot
	}
	cases := []struct {
		name     string
		terms    Terms
		baseline *Snapshot
		looks    []look
		now      time.Duration
		want     Outcome
		wantMsg  string
	}{{
		name:     "a node that stays well passes",
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{time.Second, snap(readyNode, runningPod)}, {10 * time.Minute, snap(readyNode, runningPod)}},
		now:      10 * time.Minute,
		want:     Pass,
	}, {
		name:     "a pod rejected after the restart fails, naming it",
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(readyNode, rejectedPod)}, {10 * time.Minute, snap(readyNode, rejectedPod)}},
		now:      10 * time.Minute,
		want:     Fail,
		wantMsg:  "pod default/a rejected by the kubelet: OutOfpods",
	}, {
		name:     "pods signal off",
		terms:    Terms{Period: 10 * time.Minute, Grace: time.Minute, FailureThreshold: 3},
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(readyNode, rejectedPod)}, {10 * time.Minute, snap(readyNode, rejectedPod)}},
		now:      10 * time.Minute,
		want:     Pass,
	}, {
		name:     "a failure stays failed once the pod is gone",
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(readyNode, rejectedPod)}, {6 * time.Second, snap(readyNode)}},
		now:      6 * time.Second,
		want:     Fail,
		wantMsg:  "OutOfpods",
	}, {
		name:     "pressure raised after the restart fails",
		baseline: ptr(snap(readyNode)),
		looks:    []look{{5 * time.Second, snap(pressureNode)}},
		now:      5 * time.Second,
		want:     Fail,
		wantMsg:  "the Node raised MemoryPressure=True",
	}, {
		name:     "pressure raised before the restart does not count",
		baseline: ptr(snap(pressureNode)),
		looks:    []look{{5 * time.Second, snap(pressureNode)}, {10 * time.Minute, snap(pressureNode)}},
		now:      10 * time.Minute,
		want:     Pass,
	}, {
		name:     "NotReady within the grace continues",
		baseline: ptr(snap(readyNode)),
		looks:    []look{{30 * time.Second, snap(notReadyNode)}},
		now:      30 * time.Second,
		want:     Continue,
	}, {
		name:     "not Ready again within the grace of the restart fails",
		baseline: ptr(snap(readyNode)),
		looks:    []look{{30 * time.Second, snap(notReadyNode)}, {61 * time.Second, snap(notReadyNode)}},
		now:      61 * time.Second,
		want:     Fail,
		wantMsg:  "the Node was not Ready within 1m0s of the kubelet's restart: Ready=False",
	}, {
		name:     "NotReady later in the trial for longer than the grace fails",
		baseline: ptr(snap(readyNode)),
		looks: []look{{5 * time.Second, snap(readyNode)}, {5 * time.Minute, snap(readyNode)},
			{5*time.Minute + 5*time.Second, snap(notReadyNode)}, {6*time.Minute + 5*time.Second, snap(notReadyNode)}},
		now:     6*time.Minute + 5*time.Second,
		want:    Fail,
		wantMsg: "the Node has not been Ready for 1m0s (grace 1m0s): Ready=False",
	}, {
		name:     "a short NotReady stretch passes",
		baseline: ptr(snap(readyNode)),
		looks: []look{{5 * time.Second, snap(notReadyNode)}, {30 * time.Second, snap(readyNode)},
			{5 * time.Minute, snap(notReadyNode)}, {5*time.Minute + 50*time.Second, snap(readyNode)}, {10 * time.Minute, snap(readyNode)}},
		now:  10 * time.Minute,
		want: Pass,
	}, {
		name:     "not Ready when the period ends keeps the trial open",
		baseline: ptr(snap(readyNode)),
		looks:    []look{{5 * time.Second, snap(readyNode)}, {10 * time.Minute, snap(notReadyNode)}},
		now:      10 * time.Minute,
		want:     Continue,
		wantMsg:  "waiting for the Node to be Ready",
	}, {
		name:     "a Node not Ready before the restart is not judged by Ready",
		baseline: ptr(snap(notReadyNode)),
		looks:    []look{{5 * time.Second, snap(notReadyNode)}, {10 * time.Minute, snap(notReadyNode)}},
		now:      10 * time.Minute,
		want:     Pass,
	}, {
		name:    "without a baseline the first look is one: what it shows does not count",
		looks:   []look{{5 * time.Second, snap(pressureNode, rejectedPod)}, {10 * time.Minute, snap(pressureNode, rejectedPod)}},
		now:     10 * time.Minute,
		want:    Pass,
		wantMsg: "",
	}, {
		name:    "without a baseline a change after the first look counts",
		looks:   []look{{5 * time.Second, snap(readyNode, runningPod)}, {10 * time.Second, snap(readyNode, rejectedPod)}},
		now:     10 * time.Second,
		want:    Fail,
		wantMsg: "OutOfpods",
	}, {
		name:     "pods unknown before the restart: the first complete list is the baseline",
		baseline: ptr(NewSnapshot(readyNode, nil, false)),
		looks: []look{{5 * time.Second, snap(readyNode, rejectedPod)}, {6 * time.Second, snap(readyNode, rejectedPod, testPod("b", corev1.PodFailed, "Evicted", ""))},
			{10 * time.Minute, snap(readyNode)}},
		now:     10 * time.Minute,
		want:    Fail,
		wantMsg: "pod default/b evicted by the kubelet: Evicted",
	}, {
		name:     "a running pod ended by the kubelet without a reason fails",
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(readyNode, testPod("a", corev1.PodSucceeded, "", "500m"))}},
		now:      5 * time.Second,
		want:     Fail,
		wantMsg:  "pod default/a stopped by the kubelet (Succeeded, restartPolicy Always, not deleted)",
	}, {
		name:     "allocatable below the running pods' requests fails",
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(testNode([]string{"Ready=True"}, "cpu=100m", "pods=110"), runningPod)}},
		now:      5 * time.Second,
		want:     Fail,
		wantMsg:  "allocatable cpu dropped from 2 to 100m, below the 500m",
	}, {
		name:     "a shortfall within its grace continues",
		terms:    graceful,
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(shortNode, runningPod)}, {34 * time.Second, snap(shortNode, runningPod)}},
		now:      34 * time.Second,
		want:     Continue,
	}, {
		name:     "a shortfall that outlasts its grace fails",
		terms:    graceful,
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(shortNode, runningPod)}, {35 * time.Second, snap(shortNode, runningPod)}},
		now:      35 * time.Second,
		want:     Fail,
		wantMsg:  "allocatable cpu dropped from 2 to 100m, below the 500m its pods request (for 30s)",
	}, {
		name:     "within the grace the kubelet's rejection names the pod",
		terms:    graceful,
		baseline: ptr(snap(readyNode, runningPod)),
		looks: []look{{5 * time.Second, snap(shortNode, runningPod)},
			{6 * time.Second, snap(shortNode, testPod("a", corev1.PodFailed, "OutOfcpu", "500m"))}},
		now:     6 * time.Second,
		want:    Fail,
		wantMsg: "pod default/a rejected by the kubelet: OutOfcpu",
	}, {
		name:     "a shortfall when the period ends keeps the trial open",
		terms:    graceful,
		baseline: ptr(snap(readyNode, runningPod)),
		looks:    []look{{5 * time.Second, snap(readyNode, runningPod)}, {10 * time.Minute, snap(shortNode, runningPod)}},
		now:      10 * time.Minute,
		want:     Continue,
		wantMsg:  "waiting for the kubelet to resolve: the Node's allocatable cpu dropped",
	}, {
		name:     "no look at the Node (offline): the kubelet's health judges alone",
		baseline: ptr(snap(readyNode)),
		now:      10 * time.Minute,
		want:     Pass,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			terms := tc.terms
			if terms.Period == 0 {
				terms = signalsTerms
			}
			tracker := NewTracker(terms, 0)
			if tc.baseline != nil {
				tracker.SetBaseline(*tc.baseline)
			}
			tracker.Observe(nil)
			for _, l := range tc.looks {
				tracker.ObserveNode(l.at, l.snap)
			}
			got := tracker.Verdict(0, tc.now)
			if got.Outcome != tc.want {
				t.Fatalf("Verdict = %v (%s), want %v", got.Outcome, got.Message, tc.want)
			}
			if !strings.Contains(got.Message, tc.wantMsg) {
				t.Fatalf("message %q does not contain %q", got.Message, tc.wantMsg)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
