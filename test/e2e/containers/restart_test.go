package containers_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestKubeletRestartKeepsContainersRunning: a change a restart carries
// (maxPods raised) is assigned to a real-container node running a
// workload. The agent restarts the kubelet (its unit's journal shows the
// new start), and the container runs on throughout: the same pod, the same
// container, the same processes, never restarted, its heartbeat in its
// emptyDir advancing before and after.
func TestKubeletRestartKeepsContainersRunning(t *testing.T) {
	n := startPool(t, "keep", 1)[0]
	ns := namespace(t, "keep-apps")
	deployment(t, ns, "app", "keep", 1, 0, corev1.ResourceRequirements{}, "--write", "/data")
	before := onlyPod(t, waitRunning(t, ns, "app", 1, n))
	beating(t, before)
	starts, err := n.KubeletRestarts()
	if err != nil {
		t.Fatal(err)
	}

	cm := configMap(t, "keep-maxpods", "maxPods: 150\n")
	assign(t, n, cm)
	restarts, err := n.KubeletRestarts()
	if err != nil {
		t.Fatal(err)
	}
	if len(restarts) <= len(starts) {
		t.Fatalf("the kubelet was not restarted: %d starts before, %d after", len(starts), len(restarts))
	}

	after := onlyPod(t, waitRunning(t, ns, "app", 1, n))
	if after.pod.UID != before.pod.UID || after.cgroup != before.cgroup || !slices.Equal(after.pids, before.pids) {
		t.Fatalf("after the kubelet's restart %s, before %s: want the same pod, container and processes", after, before)
	}
	for _, pid := range before.pids {
		if !framework.ProcessRunning(pid) {
			t.Errorf("process %d of %s ended", pid, before)
		}
	}
	for _, st := range after.pod.Status.ContainerStatuses {
		if st.RestartCount != 0 {
			t.Errorf("container %s restarted %d times", st.Name, st.RestartCount)
		}
	}
	beating(t, after)
}
