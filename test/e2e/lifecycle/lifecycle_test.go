package lifecycle_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// waitTimeout bounds waits for things that take seconds on an idle machine,
// generous for a busy two-core one.
const waitTimeout = 2 * time.Minute

// notReadyWithin bounds how long after its kubelet stops a Node may stay
// Ready: the grace period the controller-manager runs with, plus the
// kubelet's Lease renewal interval (10 s: the last renewal may be that old
// when the kubelet stops), plus slack. Upstream's default grace period
// (50 s) would not fit in it.
const notReadyWithin = controlplane.NodeMonitorGracePeriod + 10*time.Second + 30*time.Second

// TestStoppedKubeletNodeTurnsUnknownAndBack: a real kubelet stopped through
// its unit (`systemctl stop kubelet`) stops renewing its Lease, and the node
// lifecycle controller marks its Node Unknown and taints it unreachable;
// started again, the kubelet reports the Node Ready and the taint goes.
func TestStoppedKubeletNodeTurnsUnknownAndBack(t *testing.T) {
	ctx := t.Context()
	const name = "lifecycle-a"
	node, err := framework.StartNode(ctx, env, framework.NodeOptions{Name: name, Binaries: binaries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelet log:\n%s", node.KubeletLogTail(40))
		}
		node.Stop()
		_ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := env.WaitNodeReady(ctx, name, waitTimeout); err != nil {
		t.Fatal(err)
	}
	waitTaint(t, name, "the not-ready taint lifted", func(taints []corev1.Taint) bool { return !hasTaint(taints, corev1.TaintNodeNotReady) })

	if out, err := node.Systemctl(ctx, "stop"); err != nil || out != "inactive" {
		t.Fatalf("stopping the kubelet: %q, %v", out, err)
	}
	stopped := time.Now()
	got, err := env.WaitNodeNotReady(ctx, name, notReadyWithin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Node %s not Ready %v after its kubelet stopped", name, time.Since(stopped).Round(time.Second))
	// The controller's verdict, not the kubelet's: a kubelet that stops
	// posts nothing, and Unknown is what the controller writes for silence.
	if ready := framework.NodeReadyCondition(got); ready.Status != corev1.ConditionUnknown || ready.Reason != "NodeStatusUnknown" {
		t.Errorf("Ready condition %s (%s: %s), want Unknown (NodeStatusUnknown) from the node lifecycle controller", ready.Status, ready.Reason, ready.Message)
	}
	waitTaint(t, name, "the unreachable NoSchedule taint", func(taints []corev1.Taint) bool {
		return slices.ContainsFunc(taints, func(taint corev1.Taint) bool {
			return taint.Key == corev1.TaintNodeUnreachable && taint.Effect == corev1.TaintEffectNoSchedule
		})
	})

	if out, err := node.Systemctl(ctx, "start"); err != nil || !strings.HasPrefix(out, "active") {
		t.Fatalf("starting the kubelet: %q, %v", out, err)
	}
	got, err = env.WaitNodeReady(ctx, name, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if ready := framework.NodeReadyCondition(got); ready.Reason != "KubeletReady" {
		t.Errorf("Ready condition %s (%s), want the kubelet's own KubeletReady", ready.Status, ready.Reason)
	}
	waitTaint(t, name, "the unreachable taints lifted", func(taints []corev1.Taint) bool {
		return !hasTaint(taints, corev1.TaintNodeUnreachable) && !hasTaint(taints, corev1.TaintNodeNotReady)
	})
}

func hasTaint(taints []corev1.Taint, key string) bool {
	return slices.ContainsFunc(taints, func(taint corev1.Taint) bool { return taint.Key == key })
}

// waitTaint waits until the Node's taints satisfy want.
func waitTaint(t *testing.T, name, what string, want func([]corev1.Taint) bool) {
	t.Helper()
	err := framework.Eventually(t.Context(), waitTimeout, "Node "+name+": "+what, func(ctx context.Context) (bool, string, error) {
		node, err := env.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var taints []string
		for _, taint := range node.Spec.Taints {
			taints = append(taints, taint.ToString())
		}
		return want(node.Spec.Taints), "taints " + strings.Join(taints, ", "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
