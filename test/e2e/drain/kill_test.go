package drain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/statedir"
)

// killDelays are how long each agent lives before its SIGKILL, from its
// start: from before it reads anything to past a whole drained change
// (cordon, evictions, the restart's stop and start, a 2 s trial), so that
// the kills land on every step of the drain path in turn.
var killDelays = []time.Duration{
	50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond,
	800 * time.Millisecond, 1200 * time.Millisecond, 1700 * time.Millisecond, 2300 * time.Millisecond,
	3000 * time.Millisecond, 4000 * time.Millisecond, 5500 * time.Millisecond,
}

// TestAgentKilledThroughoutTheDrain kills the agent (SIGKILL, with the
// kubelet stop or start command it may be running) again and again while
// its node moves from the CPU manager's none policy to static and back,
// with pods to evict. After every kill the state directory holds only
// sound records; a cordon the agent made is one a drain record accounts
// for, or one the next agent lifts. After each change, a last agent left
// alone converges: the kubelet runs the assigned policy with a checkpoint
// it wrote for it, the status says so, and the node is uncordoned.
func TestAgentKilledThroughoutTheDrain(t *testing.T) {
	nodes := startPool(t, "kill", 1, "--trial-period=2s", "--health-probe-period=100ms", "--health-probe-timeout=80ms", "--resync-period=1s")
	n := nodes[0]
	ns := namespace(t, "kill-apps")
	workload(t, ns, "kill", 2, 0)
	waitRunning(t, ns, "web", 2)
	static := configMap(t, "kill-static", staticPolicy)

	for _, step := range []struct {
		source string
		policy string
		cm     *corev1.ConfigMap
	}{
		{configNamespace + "/" + static.Name, "static", static},
		{"", "none", nil},
	} {
		if err := n.Assign(t.Context(), step.source); err != nil {
			t.Fatal(err)
		}
		for i, delay := range killDelays {
			time.Sleep(delay)
			if _, err := n.KillAgent(); err != nil {
				t.Fatal(err)
			}
			if _, err := statedir.Inspect(n.StateDir()); err != nil {
				t.Fatalf("kill %d (after %v) toward %s: the state directory is not sound: %v", i, delay, step.policy, err)
			}
			if err := n.SpawnAgent(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := n.WaitReport(t.Context(), waitTimeout, "the "+step.policy+" policy in place", func(r framework.Report) bool {
			if step.cm == nil {
				return r.Status.Assigned == nil && r.Status.Active == nil && r.ConditionIs(corev1.ConditionTrue, contract.ReasonLocalConfig)
			}
			return framework.RefersTo(r.Status.LastKnownGood, step.cm) && framework.RefersTo(r.Status.Active, step.cm) &&
				r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
		})
		if err != nil {
			t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(60))
		}
		waitPolicy(t, step.policy, n)
		uncordoned(t, n)
		in, err := statedir.Inspect(n.StateDir())
		if err != nil || in.Drain != nil {
			t.Fatalf("converged on %s: drain record %+v, %v", step.policy, in.Drain, err)
		}
	}
	// The pods evicted on the way come back once the node is schedulable.
	waitRunning(t, ns, "web", 2)
	node, err := env.Admin.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, marked := node.Annotations[contract.CordonedAnnotation]; marked || node.Spec.Unschedulable {
		t.Fatal(fmt.Sprintf("left cordoned: %v", node.Spec))
	}
}
