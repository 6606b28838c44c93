package drain_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestPoolMovesToStaticCPUManager: a pool of three running a Deployment
// under a PodDisruptionBudget and a DaemonSet is moved from the CPU
// manager's none policy to static. A restart alone cannot do it (the
// kubelet refuses to start while its checkpoint records another policy),
// so each node is drained: cordoned, its web pods evicted as the budget
// allows and placed elsewhere by the scheduler, the kubelet stopped, its
// cpu_manager_state removed, started, tried and uncordoned. Every node
// ends on static with a checkpoint the kubelet wrote for it, every web
// pod runs, the DaemonSet's pods were never evicted, and no node is left
// cordoned.
func TestPoolMovesToStaticCPUManager(t *testing.T) {
	nodes := startPool(t, "pin", 3)
	ns := namespace(t, "pin-apps")
	workload(t, ns, "pin", 4, 3)
	waitRunning(t, ns, "web", 4)
	daemons := waitRunning(t, ns, "node-agent", 3)
	waitPolicy(t, "none", nodes...)

	watch := watchCordons(t, nodes...)
	configMap(t, "pin-static", staticPolicy)
	createRollout(t, "pin", "pin", "pin-static", "")
	r := waitRollout(t, "pin", v1alpha1.ConditionComplete)
	watch.end()
	t.Logf("rollout: %s", framework.DescribeRollout(r))

	waitPolicy(t, "static", nodes...)
	uncordoned(t, nodes...)
	for _, n := range nodes {
		if !watch.cordoned[n.Name] {
			t.Errorf("%s was never seen cordoned by its agent: not drained", n.Name)
		}
		phases := strings.Join(watch.phases[n.Name], ",")
		if !strings.Contains(phases, contract.PhaseDraining) && !strings.Contains(phases, contract.PhaseRestarting) {
			t.Errorf("%s never reported a drain's phase in its status: %q", n.Name, phases)
		}
		st, err := readCPUManagerState(n)
		if err != nil {
			t.Fatal(err)
		}
		if st.DefaultCPUSet == "" {
			t.Errorf("%s: the static policy's checkpoint has no default CPU set: %+v", n.Name, st)
		}
	}
	// A drain is no failure: no agent reported one on the way (a cordon
	// that met the agent's own status write once did).
	for _, n := range nodes {
		events, err := env.Admin.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + n.Name + ",type=Warning"})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events.Items {
			if ev.Source.Component == "nodeguard-agent" {
				t.Errorf("%s: the agent's Warning event %s: %s", n.Name, ev.Reason, ev.Message)
			}
		}
	}
	waitRunning(t, ns, "web", 4)
	after := waitRunning(t, ns, "node-agent", 3)
	for name := range daemons {
		if _, ok := after[name]; !ok {
			t.Errorf("DaemonSet pod %s was evicted; only other pods must leave", name)
		}
	}
}

// TestFailedStaticTrialReturnsThroughDrain: a static-policy configuration
// that the kubelet runs but that fails its trial (a soft eviction
// threshold above the node's memory raises MemoryPressure) goes back to
// the none policy through a drain as well: going back with the static
// checkpoint in place, the kubelet would refuse to start. The node ends
// on none, with a checkpoint written for it, and uncordoned.
func TestFailedStaticTrialReturnsThroughDrain(t *testing.T) {
	nodes := startPool(t, "back", 1)
	n := nodes[0]
	waitPolicy(t, "none", n)
	bad := configMap(t, "back-static-pressure", staticPolicy+"evictionSoft:\n  memory.available: 100Ti\nevictionSoftGracePeriod:\n  memory.available: 0s\n")
	watch := watchCordons(t, n)
	if err := n.Assign(t.Context(), configNamespace+"/"+bad.Name); err != nil {
		t.Fatal(err)
	}
	// The local configuration, static until its trial failed, none again:
	// and no start in between that the kubelet refused.
	why := rolledBackAfterDrain(t, n, bad, watch)
	if !strings.Contains(why, "MemoryPressure") {
		t.Errorf("rolled back for %q, want the MemoryPressure signal", why)
	}
	waitPolicy(t, "none", n)
}

// TestBudgetThatNeverAllowsEviction: a PodDisruptionBudget that allows no
// eviction (minAvailable equal to the replicas) blocks the canary's drain.
// Past the agent's drain timeout the node is uncordoned, the change is
// reported not applied with the blocking pod named, and the rollout stops
// with that node and pod in its Failed condition (onFailure Halt, so that
// the canary keeps reporting it). Nothing is left cordoned, and the pool
// runs none.
func TestBudgetThatNeverAllowsEviction(t *testing.T) {
	nodes := startPool(t, "stuck", 2, "--drain-timeout=15s")
	ns := namespace(t, "stuck-apps")
	workload(t, ns, "stuck", 2, 2)
	web := waitRunning(t, ns, "web", 2)
	configMap(t, "stuck-static", staticPolicy)
	createRollout(t, "stuck", "stuck", "stuck-static", v1alpha1.FailureHalt)
	r := waitRollout(t, "stuck", v1alpha1.ConditionFailed)
	failed := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionFailed)
	var canary *framework.Node
	for _, n := range nodes {
		if strings.Contains(failed.Message, n.Name) {
			canary = n
		}
	}
	if canary == nil {
		t.Fatalf("the Failed condition names no node: %s", failed.Message)
	}
	blocking := ""
	for name, p := range web {
		if p.Spec.NodeName == canary.Name {
			blocking = name
		}
	}
	if blocking == "" || !strings.Contains(failed.Message, blocking) {
		t.Errorf("Failed=%s %q: want the canary %s and its blocked pod %s named", failed.Reason, failed.Message, canary.Name, blocking)
	}
	report, err := canary.Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !report.ConditionIs(corev1.ConditionFalse, contract.ReasonDrainTimedOut) || !slices.Contains(report.Status.PendingPods, ns+"/"+blocking) {
		t.Errorf("canary reports %s, pendingPods %v: want %s naming %s/%s", report, report.Status.PendingPods, contract.ReasonDrainTimedOut, ns, blocking)
	}
	uncordoned(t, nodes...)
	waitPolicy(t, "none", nodes...)
	waitRunning(t, ns, "web", 2)
}

// TestAdministratorsCordonStays: a node the administrator cordoned before
// the change is drained and moved, and stays cordoned afterwards: the
// agent lifts only a cordon it set.
func TestAdministratorsCordonStays(t *testing.T) {
	nodes := startPool(t, "kept", 1)
	n := nodes[0]
	patchNode(t, n.Name, map[string]any{"spec": map[string]any{"unschedulable": true}})
	cm := configMap(t, "kept-static", staticPolicy)
	if err := n.Assign(t.Context(), configNamespace+"/"+cm.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitReport(t.Context(), waitTimeout, "the static configuration passed", func(r framework.Report) bool {
		return framework.RefersTo(r.Status.LastKnownGood, cm) && r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
	}); err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(40))
	}
	waitPolicy(t, "static", n)
	node, err := env.Admin.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, marked := node.Annotations[contract.CordonedAnnotation]; !node.Spec.Unschedulable || marked {
		t.Errorf("after the change: unschedulable=%v, agent's mark=%v; want the administrator's cordon kept, unmarked", node.Spec.Unschedulable, marked)
	}
}
