package containers_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// staticPolicy pins CPUs: the static CPU manager with half a CPU reserved
// for the system, which the policy rounds up to one whole CPU kept in the
// shared pool. A half, not reservedSystemCPUs: on a two-CPU host that
// would leave one allocatable CPU, and the agent DaemonSet's pod asks for
// some of it, so no Guaranteed pod asking a whole CPU would fit.
const staticPolicy = "cpuManagerPolicy: static\nsystemReserved:\n  cpu: 500m\n"

// nonePolicy is the default CPU manager policy, written out.
const nonePolicy = "cpuManagerPolicy: none\n"

// TestStaticCPUPolicyPinsAGuaranteedContainer rolls the CPU manager's
// static policy across a pool of two real-container nodes, through a drain
// of each (the kubelet refuses to start on a checkpoint of another
// policy), and back to none. Under none every container may run on every
// CPU. Under static the Guaranteed pod's container is on a CPU of its own:
// its cgroup's cpuset.cpus, and the affinity the kernel gives its process,
// are the one CPU cpu_manager_state records for it; the BestEffort
// container beside it has lost that CPU (the shared pool shrunk), the one
// on the other node has not. Back on none, the pinning is gone.
func TestStaticCPUPolicyPinsAGuaranteedContainer(t *testing.T) {
	nodes := startPool(t, "pin", 2)
	ns := namespace(t, "pin-apps")
	all := allCPUs(t)
	if all.Size() < 2 {
		t.Fatalf("this host has CPUs %s; pinning one needs two", all)
	}
	deployment(t, ns, "shared", "pin", 2, 1, corev1.ResourceRequirements{}, "--write", "/data")
	deployment(t, ns, "pinned", "pin", 1, 0, guaranteed(1), "--report")
	waitPolicy(t, "none", nodes...)
	for _, p := range runningOf(t, ns, nodes) {
		waitCPUs(t, p, all)
	}

	rollOut(t, "pin", configMap(t, "pin-static", staticPolicy))
	waitPolicy(t, "static", nodes...)
	pinned := onlyPod(t, waitRunning(t, ns, "pinned", 1, nodes...))
	st, err := pinned.node.CPUManagerState()
	if err != nil {
		t.Fatal(err)
	}
	exclusive, err := cpuset.Parse(st.Entries[string(pinned.pod.UID)]["work"])
	if err != nil || exclusive.Size() != 1 {
		t.Fatalf("%s: cpu_manager_state gives the Guaranteed container %q (%v), want one CPU: %+v", pinned.node.Name, exclusive, err, st)
	}
	waitCPUs(t, pinned, exclusive)
	pool := all.Difference(exclusive)
	if def, err := cpuset.Parse(st.DefaultCPUSet); err != nil || !def.Equals(pool) {
		t.Errorf("%s: cpu_manager_state's shared pool %q, want %s: every CPU but the pinned one", pinned.node.Name, st.DefaultCPUSet, pool)
	}
	shared := waitRunning(t, ns, "shared", 2, nodes...)
	for _, n := range nodes {
		want := all
		if n == pinned.node {
			want = pool
		}
		for _, p := range onNode(shared, n) {
			waitCPUs(t, p, want)
			t.Logf("%s: cpuset %s (pinned container %s on %s)", p, want, pinned.pod.Name, exclusive)
		}
	}

	rollOut(t, "pin", configMap(t, "pin-none", nonePolicy))
	waitPolicy(t, "none", nodes...)
	for _, p := range runningOf(t, ns, nodes) {
		waitCPUs(t, p, all)
	}
}

// runningOf waits for the test's two workloads, two shared pods and one
// pinned, and returns them all.
func runningOf(t *testing.T, ns string, nodes []*framework.Node) []runningPod {
	t.Helper()
	var pods []runningPod
	for _, app := range []struct {
		name  string
		count int
	}{{"shared", 2}, {"pinned", 1}} {
		for _, p := range waitRunning(t, ns, app.name, app.count, nodes...) {
			pods = append(pods, p)
		}
	}
	return pods
}

// onlyPod is the one pod of a workload of one.
func onlyPod(t *testing.T, pods map[string]runningPod) runningPod {
	t.Helper()
	for _, p := range pods {
		return p
	}
	t.Fatal("no pod")
	return runningPod{}
}
