package containers_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDrainEndsProcessesThatRunAgainElsewhere: a change that needs a drain
// (the static CPU manager policy), assigned to one node of two that run a
// Deployment of workloads writing to an emptyDir. Its agent evicts the pod
// there: the container's processes end, and the replacement's run on the
// other node, in that node's cgroup, its heartbeat advancing in its
// emptyDir there. The pod on the other node was never touched: the same
// processes run throughout.
func TestDrainEndsProcessesThatRunAgainElsewhere(t *testing.T) {
	nodes := startPool(t, "move", 2)
	drained, other := nodes[0], nodes[1]
	ns := namespace(t, "move-apps")
	deployment(t, ns, "web", "move", 2, 1, corev1.ResourceRequirements{}, "--write", "/data")
	before := waitRunning(t, ns, "web", 2, nodes...)
	evicted, stayed := onNode(before, drained), onNode(before, other)
	if len(evicted) != 1 || len(stayed) != 1 {
		t.Fatalf("pods %v: want one on each node", before)
	}
	beating(t, evicted[0])

	cm := configMap(t, "move-static", staticPolicy)
	assign(t, drained, cm)
	ended(t, "the evicted pod "+evicted[0].pod.Name+"'s processes", evicted[0].pids)

	after := waitRunning(t, ns, "web", 2, nodes...)
	if _, ok := after[evicted[0].pod.Name]; ok {
		t.Fatalf("%s still runs after the drain", evicted[0])
	}
	for name, p := range after {
		if name == stayed[0].pod.Name {
			if !slices.Equal(p.pids, stayed[0].pids) {
				t.Errorf("%s: processes %v, were %v: the pod on the other node was disturbed", name, p.pids, stayed[0].pids)
			}
			continue
		}
		if p.node != other {
			t.Errorf("the replacement %s runs on %s, want %s: the drained node was cordoned", p, p.node.Name, other.Name)
		}
		beating(t, p)
		t.Logf("evicted: %s; running again as %s", evicted[0], p)
	}
}
