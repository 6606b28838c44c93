package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// workloadTrialPeriod gives a restarted kubelet time to admit the pods it
// finds again and report the result; the suite's shared nodes have 2 s.
const workloadTrialPeriod = 12 * time.Second

// startWorkloadPool starts two real nodes of the test's own, each running
// podsPerNode pods, and labels them (as the administrator; nodes may not
// set nodeguard.dev/ labels) into a pool of their own. Everything goes when
// the test ends.
func startWorkloadPool(t *testing.T, pool string, podsPerNode int) (map[string]*framework.Node, []string) {
	t.Helper()
	names := []string{pool + "-a", pool + "-b"}
	ns := pool + "-pods"
	if _, err := env.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	started := startOwnPool(t, pool, len(names), func(_ string, o *framework.NodeOptions) { o.TrialPeriod = workloadTrialPeriod })
	for _, name := range names {
		for i := range podsPerNode {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-web-%d", name, i)},
				Spec: corev1.PodSpec{NodeName: name, AutomountServiceAccountToken: new(false),
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			}
			if _, err := env.Admin.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := framework.Eventually(t.Context(), waitTimeout, "the pool's pods to run", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == len(names)*podsPerNode, fmt.Sprintf("%d running", running), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return started, names
}

// TestCanaryRejectingItsPodsFailsTheRollout: a configuration the kubelet
// runs healthily but that makes it reject the pods it runs (maxPods below
// them) fails the canary's trial; the rollout stops with Failed=True naming
// the canary and the pods' reason, reverts the canary, and never touches
// the other Node of the pool. The rollout says drain: Never, so that the
// change meets the pods a drain would have evicted first: the trial's
// signals are what is tested here.
func TestCanaryRejectingItsPodsFailsTheRollout(t *testing.T) {
	pool := "workloads"
	poolNodes, names := startWorkloadPool(t, pool, 4)
	restarts := map[string]int{}
	for _, name := range names {
		r, err := poolNodes[name].KubeletRestarts()
		if err != nil {
			t.Fatal(err)
		}
		restarts[name] = len(r)
	}
	cm := configMap(t, "rejects-pods", "maxPods: 2\n")
	createRollout(t, "rejects-pods", rolloutSpec{
		selector:  metav1.LabelSelector{MatchLabels: map[string]string{contract.PoolLabel: pool}},
		configMap: cm.Name, canary: 1, maxUnavailable: 1, drain: v1alpha1.DrainNever,
	})
	r := waitRollout(t, "rejects-pods", "Failed and reverted", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionFailed, v1alpha1.ReasonTrialFailed) && progressing(r, v1alpha1.ReasonReverted)
	})
	msg := condition(r, v1alpha1.ConditionFailed).Message
	canary, other := "", ""
	for _, name := range names {
		if strings.Contains(msg, "Node "+name) {
			canary = name
		} else {
			other = name
		}
	}
	if canary == "" || other == "" {
		t.Fatalf("Failed does not name one canary of %v: %q", names, msg)
	}
	if !strings.Contains(msg, "OutOfpods") && !strings.Contains(msg, "allocatable pods dropped") {
		t.Errorf("Failed does not name the rejected pods' reason: %q", msg)
	}
	t.Logf("Failed: %s", msg)

	if got := source(t, canary); got != "<absent>" {
		t.Errorf("canary %s config-source %q, want it reverted to none", canary, got)
	}
	if _, err := poolNodes[canary].WaitReport(t.Context(), waitTimeout, "the canary back on its local configuration", func(o framework.Report) bool {
		return o.Status.Active == nil && o.Status.Assigned == nil && o.Condition != nil && o.Condition.Status == corev1.ConditionTrue
	}); err != nil {
		t.Fatal(err)
	}
	if got := source(t, other); got != "<absent>" {
		t.Errorf("%s, outside the canary, was assigned %q", other, got)
	}
	if runs, err := poolNodes[other].KubeletRestarts(); err != nil || len(runs) != restarts[other] {
		t.Errorf("%s's kubelet restarted during the rollout: %d starts, %d before (%v)", other, len(runs), restarts[other], err)
	}
}
