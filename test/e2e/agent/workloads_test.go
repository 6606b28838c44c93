package agent_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// workloadArgs give a trial long enough for a restarted kubelet to admit
// the pods it finds again and report the result (a few seconds here, some
// 10 s for a pod it refuses before running it), and for its eviction
// manager's first look, and short enough to keep these tests quick. The
// signals keep their defaults. --drain=Never: these tests judge the
// trial's signals, so a change that shrinks what the node holds (maxPods,
// reservations), which the agent would otherwise drain the node for
// (test/e2e/drain), must meet the pods still running there.
var workloadArgs = []string{"--trial-period=12s", "--drain=Never"}

// healthOnly turns off every signal of the Node and its pods: the trial is
// judged by the kubelet's /healthz alone, as before they existed.
var healthOnly = []string{"--trial-node-ready=false", "--trial-pressure=false", "--trial-read-pods=false"}

// runPods binds count pods to the node (spec.nodeName set by the admin, as
// the scheduler would), each requesting cpu (empty: nothing, BestEffort),
// and waits until the kubelet runs them all (fakecri: nothing executes).
func (n *node) runPods(prefix string, count int, cpu string) []string {
	n.t.Helper()
	var names []string
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: n.ns, Name: name},
			Spec: corev1.PodSpec{
				NodeName:                     n.Name,
				AutomountServiceAccountToken: new(false),
				Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if cpu != "" {
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
		if _, err := env.Admin.CoreV1().Pods(n.ns).Create(n.ctx, pod, metav1.CreateOptions{}); err != nil {
			n.t.Fatal(err)
		}
		names = append(names, name)
	}
	n.eventually(fmt.Sprintf("%d pods to run", count), func() (bool, string) {
		phases := n.podPhases()
		running := 0
		for _, name := range names {
			if strings.HasPrefix(phases[name], string(corev1.PodRunning)) {
				running++
			}
		}
		return running == count, fmt.Sprint(phases)
	})
	return names
}

// podPhases is each pod's phase in the node's namespace, with the
// kubelet's reason when it gave one.
func (n *node) podPhases() map[string]string {
	n.t.Helper()
	pods, err := env.Admin.CoreV1().Pods(n.ns).List(n.ctx, metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	phases := map[string]string{}
	for _, p := range pods.Items {
		phases[p.Name] = string(p.Status.Phase)
		if p.Status.Reason != "" {
			phases[p.Name] += " " + p.Status.Reason
		}
	}
	return phases
}

// rolledBackBySignal waits until bad is rolled back to the local
// configuration and returns the status error, which must name one of
// signals. The kubelet must have run bad without crashing until the agent
// restarted it: /healthz alone would have let it pass.
func (n *node) rolledBackBySignal(bad *corev1.ConfigMap, signals ...string) string {
	n.t.Helper()
	o := n.waitReport(bad.Name+" rolled back", func(o framework.Report) bool {
		return is(o.Status.Assigned, bad) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	named := false
	for _, s := range signals {
		named = named || strings.Contains(o.Status.Error, s)
	}
	if !named {
		n.t.Errorf("the status does not name the signal (one of %q): %q", signals, o.Status.Error)
	}
	if strings.Contains(o.Status.Error, "health") {
		n.t.Errorf("rolled back for the kubelet's health, not for its workloads: %q", o.Status.Error)
	}
	records := n.restartRecords()
	if len(records) != 3 || records[1].Behavior != framework.KubeletStopped || records[2].Behavior != framework.KubeletRunning {
		n.t.Errorf("kubelet runs %+v: want the local configuration, %s running until the agent stopped it, and the local one again", records, bad.Name)
	}
	n.t.Logf("%s: %s", bad.Name, o.Status.Error)
	return o.Status.Error
}

// TestMaxPodsBelowRunningPodsRollsBack: maxPods below the pods the node
// runs keeps the kubelet healthy; restarted with it, the kubelet admits
// the pods it finds again and rejects the ones beyond maxPods (OutOfpods),
// or, when it admits them against the Node's old status, reports an
// allocatable pod count below them. Either fails the trial, naming it.
func TestMaxPodsBelowRunningPodsRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: workloadArgs})
	n.runPods("web", 4, "")
	bad := n.configMap("kubelet-maxpods-2", "maxPods: 2\n")
	n.assign(bad.Name)
	// The running pods the kubelet rejects keep no reason in their status
	// (it goes Running -> Succeeded): the agent names them and infers
	// OutOfpods from the Node's allocatable. A pod bound later would show
	// OutOfpods itself; a kubelet that admitted them all against the old
	// Node status would leave the allocatable drop.
	n.rolledBackBySignal(bad, "stopped by the kubelet (Succeeded, restartPolicy Always, not deleted): OutOfpods",
		"rejected by the kubelet: OutOfpods", "allocatable pods dropped from 110 to 2")
	n.waitKubeletRuns(110)
}

// TestPodBoundDuringTheTrialRejectedRollsBack: maxPods equal to the pods
// running harms none of them, but a pod bound to the node during the trial
// is refused by the kubelet at admission; never having run, it keeps the
// kubelet's reason (Failed, OutOfpods), and the trial fails naming it. The
// kubelet reports the refusal at its next status sync, some 10 s later,
// within the allocatable signal's default grace (with a grace of 4 s, that
// signal fired first, on the pod the kubelet had not reported yet).
func TestPodBoundDuringTheTrialRejectedRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: workloadArgs})
	n.runPods("web", 2, "")
	full := n.configMap("kubelet-maxpods-full", "maxPods: 2\n")
	n.assign(full.Name)
	n.waitReport(full.Name+" on trial", func(o framework.Report) bool {
		return is(o.Status.Active, full) && reason(o, corev1.ConditionFalse, contract.ReasonTrialInProgress)
	})
	n.waitKubeletRuns(2)
	late := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: n.ns, Name: "late"},
		Spec: corev1.PodSpec{NodeName: n.Name, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if _, err := env.Admin.CoreV1().Pods(n.ns).Create(n.ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := n.rolledBackBySignal(full, "pod "+n.ns+"/late rejected by the kubelet: OutOfpods: Pod was rejected: Node didn't have enough resource: pods")
	if strings.Contains(msg, "web-") {
		t.Errorf("the pods that ran before were held against it: %q", msg)
	}
}

// TestReservedCPUBeyondRunningPodsRollsBack: kubeReserved that leaves the
// running pods' CPU requests no room keeps the kubelet healthy (a
// reservation above the node's capacity would make it exit at start-up,
// which the health checks already catch); restarted with it, the kubelet
// rejects them OutOfcpu, or reports an allocatable CPU below their
// requests.
func TestReservedCPUBeyondRunningPodsRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: workloadArgs})
	node := n.waitNodeReady()
	capacity := node.Status.Capacity[corev1.ResourceCPU]
	// Leave 100m: less than one pod's request, more than nothing.
	reserved := capacity.MilliValue() - 100
	n.runPods("api", 2, "300m")
	bad := n.configMap("kubelet-reserved", fmt.Sprintf("kubeReserved:\n  cpu: %dm\n", reserved))
	n.assign(bad.Name)
	n.rolledBackBySignal(bad, "stopped by the kubelet (Succeeded, restartPolicy Always, not deleted): OutOfcpu",
		"rejected by the kubelet: OutOfcpu", "allocatable cpu dropped")
}

// TestEvictionThresholdAboveFreeMemoryRollsBack: a soft eviction threshold
// above the node's memory keeps the kubelet healthy; its eviction manager
// finds the threshold met at its first look and raises MemoryPressure (and
// would go on to evict the pods). A soft threshold because this host's
// nodes keep evictionHard node-local (it is shared, and the kubelet must
// not evict on its account); the eviction manager treats both alike for
// the Node's conditions.
func TestEvictionThresholdAboveFreeMemoryRollsBack(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: workloadArgs})
	n.runPods("batch", 2, "")
	bad := n.configMap("kubelet-eviction", "evictionSoft:\n  memory.available: 100Ti\nevictionSoftGracePeriod:\n  memory.available: 0s\n")
	n.assign(bad.Name)
	n.rolledBackBySignal(bad, "the Node raised MemoryPressure=True", "evicted by the kubelet: Evicted")
}

// TestHarmlessChangeWithPodsPasses: with pods running, a change that harms
// nothing (image garbage collection starting at 80% of the disk instead of
// 85%, and stopping at 70% instead of 80%, which must stay below it) passes
// its trial with every signal on, and the pods run on.
func TestHarmlessChangeWithPodsPasses(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: workloadArgs})
	pods := n.runPods("web", 3, "100m")
	good := n.configMap("kubelet-gc-80", "imageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 70\n")
	n.assign(good.Name)
	n.passed(good)
	phases := n.podPhases()
	for _, name := range pods {
		if phases[name] != string(corev1.PodRunning) {
			t.Errorf("pod %s is %q after the trial, want Running", name, phases[name])
		}
	}
}

// TestHealthOnlyTrialPassesMaxPodsBelowRunningPods: the same harmful
// maxPods, judged by /healthz alone (every workload signal off), passes its
// trial and becomes last-known-good while the kubelet rejects pods: what
// the trial did before it watched the workloads, and what an operator gets
// who turns the signals off.
func TestHealthOnlyTrialPassesMaxPodsBelowRunningPods(t *testing.T) {
	n := newNode(t, nodeOptions{agentArgs: append(append([]string(nil), workloadArgs...), healthOnly...)})
	n.runPods("web", 4, "")
	bad := n.configMap("kubelet-maxpods-2", "maxPods: 2\n")
	n.assign(bad.Name)
	n.passed(bad)
	n.waitKubeletRuns(2)
	// The harm is real: the kubelet rejected the pods beyond maxPods and
	// killed them; they show Failed OutOfpods, or the phase their killed
	// containers left, with no reason.
	phases := n.podPhases()
	running := 0
	for _, phase := range phases {
		if phase == string(corev1.PodRunning) {
			running++
		}
	}
	if running > 2 {
		t.Errorf("the kubelet runs %d pods with maxPods 2: %v", running, phases)
	}
	t.Logf("pods after the health-only trial passed: %v", phases)
}
