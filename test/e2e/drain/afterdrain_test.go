package drain_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The trial after a drain: a change that needs the node drained empties it
// before the kubelet restarts, so every signal that looks at the pods the
// node runs sees a node with nothing left to hurt. The trial holds the
// change to what the node ran before the drain instead: those pods, the
// DaemonSet's that stayed among them, must fit the allocatable the
// restarted kubelet reports, as the scheduler fits pods.

// heldPool is one node running four web pods of 100m cpu (a Deployment
// whose budget allows every eviction, so that the drain is quick: the pool
// has no other node to take them) and a DaemonSet pod of 100m.
//
// The agents wait 5s, not 30s, before a shortfall the restarted kubelet
// leaves fails the trial: the kubelet reports its new allocatable within
// a second here.
func heldPool(t *testing.T, pool string) (*framework.Node, string) {
	t.Helper()
	n := startPool(t, pool, 1, "--trial-allocatable-grace=5s")[0]
	ns := namespace(t, pool+"-apps")
	workload(t, ns, pool, 4, 0)
	waitRunning(t, ns, "web", 4)
	waitRunning(t, ns, "node-agent", 1)
	return n, ns
}

// rolledBackAfterDrain waits until bad is rolled back to the local
// configuration, and returns the status error. The node must have been
// drained for it (the agent's cordon seen), ends uncordoned, and its
// kubelet ran bad until the agent restarted it with the local
// configuration.
func rolledBackAfterDrain(t *testing.T, n *framework.Node, bad *corev1.ConfigMap, watch *cordonWatch) string {
	t.Helper()
	report, err := n.WaitReport(t.Context(), waitTimeout, bad.Name+" rolled back", func(r framework.Report) bool {
		return framework.RefersTo(r.Status.Assigned, bad) && r.Status.Active == nil && r.ConditionIs(corev1.ConditionFalse, contract.ReasonRolledBack)
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(40))
	}
	uncordoned(t, n)
	watch.end()
	if !watch.cordoned[n.Name] {
		t.Errorf("%s was never cordoned: the change was not drained", n.Name)
	}
	restarts, err := n.KubeletRestarts()
	if err != nil {
		t.Fatal(err)
	}
	if len(restarts) != 3 || restarts[1].Behavior != framework.KubeletStopped || restarts[2].Behavior != framework.KubeletRunning {
		t.Errorf("kubelet runs %+v: want the local configuration, %s running until the agent stopped it, the local one again", restarts, bad.Name)
	}
	t.Logf("%s: %s", bad.Name, report.Status.Error)
	return report.Status.Error
}

// shortOf matches the check's words for a resource short after a drain.
func shortOf(resource, allocatable string) *regexp.Regexp {
	return regexp.MustCompile(`after the drain the Node can no longer take back the \d+ pods it ran before: .*` +
		regexp.QuoteMeta(resource) + `: \S+ requested, ` + regexp.QuoteMeta(allocatable) + ` allocatable, \S+ short`)
}

// TestMaxPodsBelowWhatTheNodeRanRollsBackAfterItsDrain: maxPods 2 on a
// node that ran five pods is classified as shrinking what the node holds:
// drained, restarted, and, judged on the emptied node, it would pass. The
// trial holds it to the five pods: it fails naming pods and the shortfall,
// and the node goes back to its local configuration, uncordoned, where its
// pods run again.
func TestMaxPodsBelowWhatTheNodeRanRollsBackAfterItsDrain(t *testing.T) {
	n, ns := heldPool(t, "fewer")
	watch := watchCordons(t, n)
	bad := configMap(t, "fewer-maxpods-2", "maxPods: 2\n")
	if err := n.Assign(t.Context(), configNamespace+"/"+bad.Name); err != nil {
		t.Fatal(err)
	}
	why := rolledBackAfterDrain(t, n, bad, watch)
	if !shortOf("pods", "2").MatchString(why) {
		t.Errorf("rolled back for %q, want the after-drain check naming pods and the shortfall", why)
	}
	waitRunning(t, ns, "web", 4)
}

// TestReservationsThatLeaveNoRoomRollBackAfterTheDrain: kubeReserved that
// leaves 150m of the node's cpu, under pods that requested 500m, is drained
// and rolled back by the trial, naming cpu. The DaemonSet pod that stays
// (100m) still fits, so that only the pods the drain took away, which the
// kubelet never sees again, can tell: the after-drain check.
func TestReservationsThatLeaveNoRoomRollBackAfterTheDrain(t *testing.T) {
	n, _ := heldPool(t, "tight")
	node, err := env.Admin.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// All of the node's cpu but 150m: a reservation above the capacity
	// would make the kubelet refuse to start, which its health catches;
	// one that left the DaemonSet pod no room would have the kubelet
	// reject it, a signal the trial sees without a drain.
	reserved := node.Status.Capacity.Cpu().DeepCopy()
	reserved.Sub(resource.MustParse("150m"))
	watch := watchCordons(t, n)
	bad := configMap(t, "tight-reserved", fmt.Sprintf("kubeReserved:\n  cpu: %s\n", reserved.String()))
	if err := n.Assign(t.Context(), configNamespace+"/"+bad.Name); err != nil {
		t.Fatal(err)
	}
	why := rolledBackAfterDrain(t, n, bad, watch)
	if !shortOf("cpu", "150m").MatchString(why) {
		t.Errorf("rolled back for %q, want the after-drain check naming cpu and the shortfall", why)
	}
}

// TestShrinkAllowedPassesAndSaysSo: the same maxPods 2, assigned with
// nodeguard.dev/trial allowing it to shrink the node, passes its trial and
// becomes last-known-good; the status says the check was waived and what it
// found.
func TestShrinkAllowedPassesAndSaysSo(t *testing.T) {
	n, _ := heldPool(t, "shrink")
	small := configMap(t, "shrink-maxpods-2", "maxPods: 2\n")
	patchNode(t, n.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		contract.TrialAnnotation: `{"allowShrink":true}`, contract.ConfigSourceAnnotation: configNamespace + "/" + small.Name}}})
	report, err := n.WaitReport(t.Context(), waitTimeout, small.Name+" passed", func(r framework.Report) bool {
		return framework.RefersTo(r.Status.LastKnownGood, small) && r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(40))
	}
	for _, want := range []string{"the after-drain check was waived (allowShrink)", "no longer fit its allocatable: pods: ", " requested, 2 allocatable"} {
		if !strings.Contains(report.Status.Waived, want) {
			t.Errorf("status.waived %q: want the waived check and what it found (%q)", report.Status.Waived, want)
		}
	}
	if report.Condition == nil || !strings.Contains(report.Condition.Message, "waived") {
		t.Errorf("condition %+v does not say the check was waived", report.Condition)
	}
	uncordoned(t, n)
	configz, err := n.Configz(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if kc, _ := configz["kubeletconfig"].(map[string]any); fmt.Sprint(kc["maxPods"]) != "2" {
		t.Errorf("the kubelet runs maxPods %v, want 2", kc["maxPods"])
	}
}
