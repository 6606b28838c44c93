package trial

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testNode is a Node with the given conditions ("Ready=True", ...) and
// allocatable ("cpu=2", ...).
func testNode(conditions []string, allocatable ...string) *corev1.Node {
	n := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{}}}
	for _, c := range conditions {
		t, s, _ := strings.Cut(c, "=")
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: corev1.NodeConditionType(t), Status: corev1.ConditionStatus(s), Reason: "KubeletSays", Message: "because"})
	}
	for _, a := range allocatable {
		name, q, _ := strings.Cut(a, "=")
		n.Status.Allocatable[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	return n
}

// testPod is a pod bound to the node, named ns/name, with uid name, in
// phase with reason, requesting cpu (empty: nothing).
func testPod(name string, phase corev1.PodPhase, reason, cpu string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: phase, Reason: reason},
	}
	if reason != "" {
		p.Status.Message = "the kubelet's words"
	}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return p
}

func snap(node *corev1.Node, pods ...*corev1.Pod) Snapshot { return NewSnapshot(node, pods, true) }

var readyNode = testNode([]string{"Ready=True", "MemoryPressure=False", "DiskPressure=False", "PIDPressure=False"}, "cpu=2", "memory=4Gi", "pods=110")

func TestNotReady(t *testing.T) {
	for _, tc := range []struct {
		conditions []string
		want       bool
		how        string
	}{
		{[]string{"Ready=True"}, false, ""},
		{[]string{"Ready=False"}, true, "Ready=False KubeletSays: because"},
		{[]string{"Ready=Unknown"}, true, "Ready=Unknown"},
		{[]string{"MemoryPressure=False"}, true, "no Ready condition"},
	} {
		got, how := NotReady(snap(testNode(tc.conditions)))
		if got != tc.want || !strings.Contains(how, tc.how) {
			t.Errorf("NotReady(%v) = %v, %q; want %v, %q", tc.conditions, got, how, tc.want, tc.how)
		}
	}
}

func TestRaisedPressure(t *testing.T) {
	watched := DefaultPressureConditions
	memory := testNode([]string{"Ready=True", "MemoryPressure=True", "DiskPressure=False"})
	for _, tc := range []struct {
		name        string
		before, now *corev1.Node
		watched     []corev1.NodeConditionType
		want        string
		wantNothing bool
	}{
		{name: "newly raised", before: readyNode, now: memory, watched: watched, want: "MemoryPressure=True KubeletSays: because"},
		{name: "raised before the restart too", before: memory, now: memory, watched: watched, wantNothing: true},
		{name: "absent before", before: testNode([]string{"Ready=True"}), now: memory, watched: watched, want: "MemoryPressure=True"},
		{name: "not watched", before: readyNode, now: memory, watched: []corev1.NodeConditionType{corev1.NodeDiskPressure}, wantNothing: true},
		{name: "none watched", before: readyNode, now: memory, wantNothing: true},
		{name: "nothing raised", before: readyNode, now: readyNode, watched: watched, wantNothing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RaisedPressure(snap(tc.before), snap(tc.now), tc.watched)
			if tc.wantNothing {
				if len(got) != 0 {
					t.Fatalf("RaisedPressure = %q, want nothing", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("RaisedPressure = %q, want one mentioning %q", got, tc.want)
			}
		})
	}
}

func TestFailedPods(t *testing.T) {
	running := func(name string) *corev1.Pod { return testPod(name, corev1.PodRunning, "", "") }
	failed := func(name, reason string) *corev1.Pod { return testPod(name, corev1.PodFailed, reason, "") }
	reasons := DefaultPodFailureReasons
	for _, tc := range []struct {
		name        string
		before, now Snapshot
		reasons     []string
		want        []string
	}{{
		name:    "rejected after the restart",
		before:  snap(readyNode, running("a"), running("b")),
		now:     snap(readyNode, running("a"), failed("b", "OutOfpods")),
		reasons: reasons,
		want:    []string{"pod default/b rejected by the kubelet: OutOfpods: the kubelet's words"},
	}, {
		name:    "evicted, and a prefix matches",
		before:  snap(readyNode, running("a"), running("b")),
		now:     snap(readyNode, failed("a", "Evicted"), failed("b", "OutOfcpu")),
		reasons: reasons,
		want: []string{"pod default/a evicted by the kubelet: Evicted: the kubelet's words",
			"pod default/b rejected by the kubelet: OutOfcpu: the kubelet's words"},
	}, {
		name:    "failed before the restart: not the new configuration's doing",
		before:  snap(readyNode, failed("a", "OutOfpods")),
		now:     snap(readyNode, failed("a", "OutOfpods")),
		reasons: reasons,
	}, {
		name:    "a pod bound during the trial and rejected counts",
		before:  snap(readyNode, running("a")),
		now:     snap(readyNode, running("a"), failed("new", "OutOfmemory")),
		reasons: reasons,
		want:    []string{"pod default/new rejected by the kubelet: OutOfmemory: the kubelet's words"},
	}, {
		name:    "a container that failed on its own is no signal",
		before:  snap(readyNode, running("a")),
		now:     snap(readyNode, failed("a", "")),
		reasons: reasons,
	}, {
		name:    "a reason not listed",
		before:  snap(readyNode, running("a")),
		now:     snap(readyNode, failed("a", "DeadlineExceeded")),
		reasons: reasons,
	}, {
		name:   "signal off",
		before: snap(readyNode, running("a")),
		now:    snap(readyNode, failed("a", "OutOfpods")),
	}, {
		name:    "pods not known before",
		before:  NewSnapshot(readyNode, nil, false),
		now:     snap(readyNode, failed("a", "OutOfpods")),
		reasons: reasons,
	}, {
		name:    "pods not known now",
		before:  snap(readyNode, running("a")),
		now:     NewSnapshot(readyNode, nil, false),
		reasons: reasons,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range FailedPods(tc.before, tc.now, tc.reasons) {
				got = append(got, f.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("FailedPods =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestMatchesReason(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   bool
	}{{"OutOfpods", true}, {"OutOfnvidia.com/gpu", true}, {"Evicted", true}, {"EvictedSoon", false}, {"", false}, {"Out", false}} {
		if got := matchesReason(tc.reason, DefaultPodFailureReasons); got != tc.want {
			t.Errorf("matchesReason(%q) = %v, want %v", tc.reason, got, tc.want)
		}
	}
}

func TestAllocatableShortfall(t *testing.T) {
	pods := []*corev1.Pod{
		testPod("a", corev1.PodRunning, "", "500m"),
		testPod("b", corev1.PodRunning, "", "500m"),
		testPod("done", corev1.PodFailed, "OutOfcpu", "4"),
	}
	for _, tc := range []struct {
		name        string
		before, now *corev1.Node
		podsKnown   bool
		want        []string
	}{{
		name:      "cpu reserved away from running pods",
		before:    readyNode,
		now:       testNode(nil, "cpu=100m", "memory=4Gi", "pods=110"),
		podsKnown: true,
		want:      []string{"the Node's allocatable cpu dropped from 2 to 100m, below the 1 its pods request"},
	}, {
		name:      "maxPods below the pods that hold resources",
		before:    readyNode,
		now:       testNode(nil, "cpu=2", "memory=4Gi", "pods=1"),
		podsKnown: true,
		want:      []string{"the Node's allocatable pods dropped from 110 to 1, below the 2 its pods request"},
	}, {
		name:      "a drop that still fits",
		before:    readyNode,
		now:       testNode(nil, "cpu=1", "memory=1Gi", "pods=2"),
		podsKnown: true,
	}, {
		name:      "already short before: not the new configuration's doing",
		before:    testNode(nil, "cpu=500m"),
		now:       testNode(nil, "cpu=100m"),
		podsKnown: true,
	}, {
		name:      "not reported yet",
		before:    readyNode,
		now:       testNode(nil),
		podsKnown: true,
	}, {
		name:   "pods not known",
		before: readyNode,
		now:    testNode(nil, "cpu=100m"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := AllocatableShortfall(snap(tc.before), NewSnapshot(tc.now, pods, tc.podsKnown))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("AllocatableShortfall =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want string
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1")}, {Resources: req("500m")}}}, "1500m"},
		{"a larger init container wins", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("3")}},
			Containers:     []corev1.Container{{Resources: req("1")}}}, "3"},
		{"sidecars add to both", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("1"), RestartPolicy: &always}, {Resources: req("2500m")}},
			Containers:     []corev1.Container{{Resources: req("1")}}}, "3500m"},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1")}},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}, "1250m"},
		{"pod-level requests replace the containers'", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1")}},
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podRequests(&corev1.Pod{Spec: tc.spec})[corev1.ResourceCPU]
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
				t.Fatalf("cpu request = %s, want %s", got.String(), tc.want)
			}
		})
	}
}

func TestNodeSignalsValidate(t *testing.T) {
	good := NodeSignals{Ready: true, ReadyGrace: 1, PressureConditions: DefaultPressureConditions, PodFailureReasons: DefaultPodFailureReasons,
		PodsStopped: true, Allocatable: true}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := NodeSignals{Ready: true, PressureConditions: []corev1.NodeConditionType{"Ready"}, PodFailureReasons: []string{"*", "Out*Of"}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"Ready grace period", `pressure condition "Ready"`, `reason "*"`, `reason "Out*Of"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestStoppedPods(t *testing.T) {
	running := func(name string) *corev1.Pod { return testPod(name, corev1.PodRunning, "", "") }
	over := func(name string, phase corev1.PodPhase, reason string) *corev1.Pod {
		p := testPod(name, phase, reason, "")
		p.Status.Message = ""
		return p
	}
	never := func(p *corev1.Pod) *corev1.Pod { p.Spec.RestartPolicy = corev1.RestartPolicyNever; return p }
	deleting := func(p *corev1.Pod) *corev1.Pod { now := metav1.Now(); p.DeletionTimestamp = &now; return p }
	for _, tc := range []struct {
		name        string
		before, now Snapshot
		want        []string
	}{{
		name:   "a running pod the kubelet ended without a reason",
		before: snap(readyNode, running("a"), running("b")),
		now:    snap(readyNode, running("a"), over("b", corev1.PodSucceeded, "")),
		want:   []string{"pod default/b stopped by the kubelet: Succeeded with restartPolicy Always, not deleted"},
	}, {
		name:   "Failed without a reason too",
		before: snap(readyNode, running("a")),
		now:    snap(readyNode, over("a", corev1.PodFailed, "")),
		want:   []string{"pod default/a stopped by the kubelet: Failed with restartPolicy Always, not deleted"},
	}, {
		name:   "a pod that may end on its own",
		before: snap(readyNode, never(running("a"))),
		now:    snap(readyNode, never(over("a", corev1.PodSucceeded, ""))),
	}, {
		name:   "a pod being deleted",
		before: snap(readyNode, running("a")),
		now:    snap(readyNode, deleting(over("a", corev1.PodSucceeded, ""))),
	}, {
		name:   "a reason is judged by the reasons list",
		before: snap(readyNode, running("a")),
		now:    snap(readyNode, over("a", corev1.PodFailed, "DeadlineExceeded")),
	}, {
		name:   "over before the restart",
		before: snap(readyNode, over("a", corev1.PodSucceeded, "")),
		now:    snap(readyNode, over("a", corev1.PodSucceeded, "")),
	}, {
		name:   "not seen before the restart",
		before: snap(readyNode),
		now:    snap(readyNode, over("a", corev1.PodSucceeded, "")),
	}, {
		name:   "pods not known before",
		before: NewSnapshot(readyNode, nil, false),
		now:    snap(readyNode, over("a", corev1.PodSucceeded, "")),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range StoppedPods(tc.before, tc.now) {
				got = append(got, f.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("StoppedPods =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDescribeStopped(t *testing.T) {
	stoppedPod := func(name, cpu string) *corev1.Pod {
		p := testPod(name, corev1.PodSucceeded, "", cpu)
		p.Status.Message = ""
		return p
	}
	running := testPod("a", corev1.PodRunning, "", "500m")
	for _, tc := range []struct {
		name string
		node *corev1.Node
		pods []*corev1.Pod
		want string
	}{{
		name: "more pods than the Node's allocatable pods",
		node: testNode(nil, "cpu=2", "pods=2"),
		pods: []*corev1.Pod{running, testPod("b", corev1.PodRunning, "", ""), stoppedPod("c", ""), stoppedPod("d", "")},
		want: "pods default/c, default/d stopped by the kubelet (Succeeded, restartPolicy Always, not deleted): OutOfpods, " +
			"as the kubelet rejects at admission: with them the Node's pods request 4 pods, its allocatable is 2",
	}, {
		name: "more CPU than the Node's allocatable",
		node: testNode(nil, "cpu=100m", "pods=110"),
		pods: []*corev1.Pod{stoppedPod("c", "300m")},
		want: "pod default/c stopped by the kubelet (Succeeded, restartPolicy Always, not deleted): OutOfcpu, " +
			"as the kubelet rejects at admission: with them the Node's pods request 300m cpu, its allocatable is 100m",
	}, {
		name: "nothing short: no reason to give",
		node: testNode(nil, "cpu=2", "pods=110"),
		pods: []*corev1.Pod{running, stoppedPod("c", "300m")},
		want: "pod default/c stopped by the kubelet (Succeeded, restartPolicy Always, not deleted): " +
			"a running pod the kubelet rejects at admission ends so; the pods' Events give the reason",
	}, {
		name: "a few named, the rest counted",
		node: testNode(nil, "pods=110"),
		pods: []*corev1.Pod{stoppedPod("c", ""), stoppedPod("d", ""), stoppedPod("e", ""), stoppedPod("f", ""), stoppedPod("g", "")},
		want: "pods default/c, default/d, default/e, 2 more stopped by the kubelet",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var before []*corev1.Pod
			for _, p := range tc.pods {
				b := p.DeepCopy()
				b.Status.Phase = corev1.PodRunning
				before = append(before, b)
			}
			now := snap(tc.node, tc.pods...)
			got := DescribeStopped(StoppedPods(snap(tc.node, before...), now), now)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("DescribeStopped =\n%s\nwant it to contain\n%s", got, tc.want)
			}
		})
	}
}
