package drain_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The drain follows kubectl drain's rules: a pod no controller recreates,
// and a pod with emptyDir data, are not the agent's to delete unless the
// assignment says it may, with kubectl's two switches.

// barePod binds a pod no controller owns to the node, as an
// administrator running something by hand would.
func barePod(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: new(false), TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := env.Admin.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// scratchDeployment runs one pod with an emptyDir volume on the pool: a
// controller recreates it, but not its data.
func scratchDeployment(t *testing.T, ns, pool string) {
	t.Helper()
	labels := map[string]string{"app": "scratch"}
	template := podTemplate(pool, labels)
	template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	one := int32(1)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scratch"},
		Spec:       appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}
	if _, err := env.Admin.AppsV1().Deployments(ns).Create(t.Context(), deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestProtectedPodsBlockTheDrainUntilAllowed: a bare pod and a pod with
// emptyDir data each block the drain a change to the static CPU manager
// needs: nothing is evicted, the node is uncordoned and keeps the none
// policy, the status names the pods (DrainBlocked, counted in
// nodeguard_agent_drains_total{result="blocked"}). With kubectl's --force
// alone (nodeguard.dev/drain-force) the emptyDir pod still blocks it; with
// --delete-emptydir-data too, both are evicted and the node moves.
func TestProtectedPodsBlockTheDrainUntilAllowed(t *testing.T) {
	n := startPool(t, "keep", 1)[0]
	ns := namespace(t, "keep-apps")
	bare := barePod(t, ns, "notes", n.Name)
	scratchDeployment(t, ns, "keep")
	scratch := waitRunning(t, ns, "scratch", 1)
	var scratchPod *corev1.Pod
	for _, p := range scratch {
		scratchPod = p
	}
	waitPodRunning(t, ns, bare.Name)
	waitPolicy(t, "none", n)

	watch := watchCordons(t, n)
	static := configMap(t, "keep-static", staticPolicy)
	if err := n.Assign(t.Context(), configNamespace+"/"+static.Name); err != nil {
		t.Fatal(err)
	}
	blocked := func(what string, pods ...string) framework.Report {
		t.Helper()
		slices.Sort(pods)
		report, err := n.WaitReport(t.Context(), waitTimeout, what, func(r framework.Report) bool {
			return r.ConditionIs(corev1.ConditionFalse, contract.ReasonDrainBlocked) && slices.Equal(r.Status.PendingPods, pods)
		})
		if err != nil {
			t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(40))
		}
		return report
	}
	report := blocked("the drain blocked by both pods", ns+"/"+bare.Name, ns+"/"+scratchPod.Name)
	for _, want := range []string{"nothing was evicted", contract.DrainForceAnnotation, contract.DrainDeleteEmptyDirDataAnnotation} {
		if !strings.Contains(report.Status.Error, want) {
			t.Errorf("status error %q does not say %q", report.Status.Error, want)
		}
	}
	uncordoned(t, n)
	watch.end()
	waitPolicy(t, "none", n)
	for name, uid := range map[string]string{bare.Name: string(bare.UID), scratchPod.Name: string(scratchPod.UID)} {
		pod, err := env.Admin.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || string(pod.UID) != uid || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s after the blocked drain: %v %v", name, pod, err)
		}
	}
	if v, ok, err := n.Metric(`nodeguard_agent_drains_total{result="blocked"}`); err != nil || !ok || v < 1 {
		t.Errorf("nodeguard_agent_drains_total{result=\"blocked\"} = %v (present %v, %v), want at least 1", v, ok, err)
	}

	// --force alone: the bare pod may go, the emptyDir pod still blocks.
	patchNode(t, n.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.DrainForceAnnotation: "true"}}})
	blocked("the drain blocked by the emptyDir pod alone", ns+"/"+scratchPod.Name)
	if _, err := env.Admin.CoreV1().Pods(ns).Get(t.Context(), bare.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the bare pod is gone though the emptyDir pod blocked the drain first: %v", err)
	}

	// Both switches: evicted, and the node moves to static.
	patchNode(t, n.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.DrainDeleteEmptyDirDataAnnotation: "true"}}})
	if _, err := n.WaitReport(t.Context(), waitTimeout, "the static configuration passed", func(r framework.Report) bool {
		return framework.RefersTo(r.Status.LastKnownGood, static) && r.ConditionIs(corev1.ConditionTrue, contract.ReasonConfigActive)
	}); err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, n.AgentLogTail(40))
	}
	waitPolicy(t, "static", n)
	uncordoned(t, n)
	if _, err := env.Admin.CoreV1().Pods(ns).Get(t.Context(), bare.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the bare pod after an allowed drain: %v, want it evicted", err)
	}
	if pod, err := env.Admin.CoreV1().Pods(ns).Get(t.Context(), scratchPod.Name, metav1.GetOptions{}); err == nil && pod.DeletionTimestamp == nil {
		t.Errorf("the emptyDir pod %s survived an allowed drain", scratchPod.Name)
	}
}

// waitPodRunning waits until the pod runs.
func waitPodRunning(t *testing.T, ns, name string) {
	t.Helper()
	err := framework.Eventually(t.Context(), waitTimeout, name+" to run", func(ctx context.Context) (bool, string, error) {
		pod, err := env.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprint(pod.Status.Phase), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
