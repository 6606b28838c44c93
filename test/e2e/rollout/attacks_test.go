package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/rollout"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The attacks of one node's credentials on a pool: each test acts as the
// node with its own client certificate, against the real apiserver, the
// webhook as manifests/ configure it, and the rollout controller.

// TestANodeCannotLabelItselfIntoAPool: pools select on nodeguard.dev/pool,
// which rule 2 keeps from nodes: a node can neither add it nor change it.
func TestANodeCannotLabelItselfIntoAPool(t *testing.T) {
	client, err := env.NodeClient(slowNode)
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []any{"blue", nil} {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{contract.PoolLabel: value}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.CoreV1().Nodes().Patch(t.Context(), slowNode, types.MergePatchType, body, metav1.PatchOptions{})
		if err == nil || !strings.Contains(err.Error(), "rule 2") {
			t.Errorf("%s setting its own %s to %v: %v, want a rule 2 refusal", slowNode, contract.PoolLabel, value, err)
		}
	}
	if got := node(t, slowNode).Labels[contract.PoolLabel]; got != "slow" {
		t.Errorf("%s's %s is %q", slowNode, contract.PoolLabel, got)
	}
}

// fakeFailure writes, with the node's own credentials, what its agent
// writes when target fails its trial: the status annotation and the
// condition. The node's agent is stopped first, so that it does not write
// the truth back, and started again when the test ends.
func fakeFailure(t *testing.T, name string, target contract.ConfigMapVersion) {
	t.Helper()
	fakeReport(t, name, contract.ConfigStatus{Assigned: &target, Error: "faked: the kubelet did not come back"}, corev1.ConditionFalse, contract.ReasonRolledBack)
}

// fakeReport stops the node's agent (started again when the test ends)
// and writes, with the node's own credentials, st as its status annotation
// and a KubeletConfigReady condition of status and reason: what an agent
// that lies, or a node that took its credentials, can write.
func fakeReport(t *testing.T, name string, st contract.ConfigStatus, status corev1.ConditionStatus, reason string) {
	t.Helper()
	nodes[name].StopAgent()
	t.Cleanup(func() {
		if err := nodes[name].StartAgent(context.Background()); err != nil {
			t.Error(err)
		}
	})
	client, err := env.NodeClient(name)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	annotation, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.ConfigStatusAnnotation: string(raw)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, annotation, metav1.PatchOptions{}); err != nil {
		t.Fatalf("%s writing its status annotation: %v", name, err)
	}
	condition, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: contract.ConditionKubeletConfigReady, Status: status, Reason: reason,
		Message: "faked", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Patch(t.Context(), name, types.StrategicMergePatchType, condition, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("%s writing its condition: %v", name, err)
	}
}

func targetOf(cm *corev1.ConfigMap) contract.ConfigMapVersion {
	return contract.ConfigMapVersion{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
}

// TestAFailureFakedAfterCompleteRevertsNothing: a node of a completed pool
// that reports the pool's configuration failed is shown as such, for
// itself; the rollout does not fail and no Node is reverted.
func TestAFailureFakedAfterCompleteRevertsNothing(t *testing.T) {
	settle(t, green...)
	cm := configMap(t, "fake-after-complete", "maxPods: 71\n")
	createRollout(t, "fake-after-complete", rolloutSpec{selector: pool("green"), configMap: cm.Name, maxUnavailable: 2})
	waitRollout(t, "fake-after-complete", "Complete", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, v1alpha1.ReasonAllNodesUpdated)
	})
	waitPassedMark(t, green, cm)
	t.Cleanup(func() { pauseInCleanup(t, "fake-after-complete") })

	fakeFailure(t, "green-a", targetOf(cm))
	waitRollout(t, "fake-after-complete", "green-a shown failing on its own", func(r *v1alpha1.KubeletConfigRollout) bool {
		c := condition(r, v1alpha1.ConditionProgressing)
		return c != nil && strings.Contains(c.Message, "green-a (reports") && r.Status.Failed == 1
	})
	waitEvent(t, "Node", "green-a", "NodeFailedOutsideTrial")
	holds(t, 3*time.Second, "the pool is neither failed nor reverted", func() (bool, string) {
		r, err := getRollout(t.Context(), "fake-after-complete")
		if err != nil {
			return false, err.Error()
		}
		if isTrue(r, v1alpha1.ConditionFailed, "") {
			return false, describe(r)
		}
		for _, name := range green {
			if got := source(t, name); got != configNamespace+"/"+cm.Name {
				return false, fmt.Sprintf("%s moved to %q", name, got)
			}
		}
		return true, ""
	})
}

// TestAFailureOfANodeTheRolloutDidNotMoveFailsNothing: a node assigned the
// target by hand before the rollout, that reports it failed, is shown for
// itself; the rollout goes on with the others.
func TestAFailureOfANodeTheRolloutDidNotMoveFailsNothing(t *testing.T) {
	settle(t, green...)
	cm := configMap(t, "fake-not-moved", "maxPods: 72\n")
	if err := nodes["green-a"].Assign(t.Context(), configNamespace+"/"+cm.Name); err != nil {
		t.Fatal(err)
	}
	waitRuns(t, green[:1], cm)
	fakeFailure(t, "green-a", targetOf(cm))
	createRollout(t, "fake-not-moved", rolloutSpec{selector: pool("green"), configMap: cm.Name, maxUnavailable: 2})
	t.Cleanup(func() { pauseInCleanup(t, "fake-not-moved") })
	waitRuns(t, green[1:], cm)
	r := waitRollout(t, "fake-not-moved", "green-b updated, green-a shown", func(r *v1alpha1.KubeletConfigRollout) bool {
		c := condition(r, v1alpha1.ConditionProgressing)
		return r.Status.Updated == 1 && c != nil && strings.Contains(c.Message, "green-a (reports")
	})
	if isTrue(r, v1alpha1.ConditionFailed, "") {
		t.Errorf("the rollout failed on a Node it did not move: %s", describe(r))
	}
}

// waitPassedMark waits until the rollout has recorded each named Node's
// passed trial on cm.
func waitPassedMark(t *testing.T, names []string, cm *corev1.ConfigMap) {
	t.Helper()
	want := rollout.TrialPassedValue(targetOf(cm))
	err := framework.Eventually(t.Context(), waitTimeout, "the trial-passed marks", func(ctx context.Context) (bool, string, error) {
		for _, name := range names {
			if got := node(t, name).Annotations[contract.TrialPassedAnnotation]; got != want {
				return false, fmt.Sprintf("%s: %q", name, got), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, controllerLogs())
	}
}

// TestANodeCannotForgeItsTrialMark: the mark that shields the pool from a
// node's later reports is the controller's; the node may not write it.
func TestANodeCannotForgeItsTrialMark(t *testing.T) {
	client, err := env.NodeClient(slowNode)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"metadata":{"annotations":{"` + contract.TrialPassedAnnotation + `":"kubelet-configs/x@1"}}}`)
	_, err = client.CoreV1().Nodes().Patch(t.Context(), slowNode, types.MergePatchType, body, metav1.PatchOptions{})
	if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s writing its own %s: %v, want a refusal", slowNode, contract.TrialPassedAnnotation, err)
	}
}

// TestANodeRefusedForItsOwnStateIsSkipped: the shipped pool_naming policy
// refuses a Node whose pool label the configuration's name does not carry,
// for that Node's own state; the rollout skips it and completes the others.
func TestANodeRefusedForItsOwnStateIsSkipped(t *testing.T) {
	settle(t, green...)
	shipped, err := framework.ShippedPolicyFiles()
	if err != nil {
		t.Fatal(err)
	}
	odd := "odd"
	label(t, contract.PoolLabel, &odd, "green-b")
	for _, name := range []string{"lib.rego", "pool_naming.rego"} {
		if err := env.WritePolicyFile(name, shipped[name]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{"lib.rego", "pool_naming.rego"} {
			_ = env.RemovePolicyFile(name)
		}
		green := "green"
		label(t, contract.PoolLabel, &green, "green-b")
	})
	cm := configMap(t, "skip-green", "maxPods: 73\n")
	// The webhook reloads its policies on its own; a dry run shows when.
	err = framework.Eventually(t.Context(), waitTimeout, "pool_naming in force", func(ctx context.Context) (bool, string, error) {
		body := []byte(`{"metadata":{"annotations":{"` + contract.ConfigSourceAnnotation + `":"` + configNamespace + "/" + cm.Name + `"}}}`)
		_, err := env.Admin.CoreV1().Nodes().Patch(ctx, "green-b", types.MergePatchType, body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && contract.IsNodeStateRefusal(err), fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	createRollout(t, "skip", rolloutSpec{selector: metav1LabelIn(contract.PoolLabel, "green", odd), configMap: cm.Name, maxUnavailable: 1})
	t.Cleanup(func() { pauseInCleanup(t, "skip") })
	r := waitRollout(t, "skip", "green-a updated and green-b skipped", func(r *v1alpha1.KubeletConfigRollout) bool {
		return progressing(r, v1alpha1.ReasonNodesSkipped) && r.Status.Updated == 1
	})
	if len(r.Status.SkippedNodes) != 1 || r.Status.SkippedNodes[0].Name != "green-b" || !strings.Contains(r.Status.SkippedNodes[0].Message, "pool_naming") {
		t.Errorf("skippedNodes %+v, want green-b refused by pool_naming", r.Status.SkippedNodes)
	}
	if isTrue(r, v1alpha1.ConditionFailed, "") {
		t.Errorf("a refusal of one Node's own state failed the pool: %s", describe(r))
	}
	if got := source(t, "green-b"); got == configNamespace+"/"+cm.Name {
		t.Errorf("green-b was assigned %s", got)
	}
	waitEvent(t, "Node", "green-b", "NodeSkipped")
}

// TestAStalledRolloutReachesItsProgressDeadline: a Node that reports
// itself unavailable holds a rollout with maxUnavailable 1; after
// progressDeadlineSeconds the rollout says so, with a metric and an Event,
// and reverts nothing; once the Node recovers the rollout moves on.
func TestAStalledRolloutReachesItsProgressDeadline(t *testing.T) {
	settle(t, green...)
	before := sources(t, green)
	nodes["green-a"].StopAgent()
	agentStopped := true
	t.Cleanup(func() {
		if agentStopped {
			_ = nodes["green-a"].StartAgent(context.Background())
		}
	})
	client, err := env.NodeClient("green-a")
	if err != nil {
		t.Fatal(err)
	}
	unready, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: contract.ConditionKubeletConfigReady, Status: corev1.ConditionFalse, Reason: "Stalling",
		Message: "a node holding the pool", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Patch(t.Context(), "green-a", types.StrategicMergePatchType, unready, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	cm := configMap(t, "stalled", "maxPods: 74\n")
	createRollout(t, "stalled", rolloutSpec{selector: pool("green"), configMap: cm.Name, maxUnavailable: 1})
	t.Cleanup(func() { pauseInCleanup(t, "stalled") })
	patchRollout(t, "stalled", map[string]any{"progressDeadlineSeconds": 3})
	r := waitRollout(t, "stalled", "ProgressDeadlineExceeded", func(r *v1alpha1.KubeletConfigRollout) bool {
		return progressing(r, v1alpha1.ReasonProgressDeadlineExceeded)
	})
	if c := condition(r, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "green-a") {
		t.Errorf("Progressing %+v, want False naming green-a", c)
	}
	if isTrue(r, v1alpha1.ConditionFailed, "") {
		t.Errorf("the deadline failed the rollout: %s", describe(r))
	}
	if after := sources(t, green); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Nodes moved while stalled: %v -> %v", before, after)
	}
	waitEvent(t, "KubeletConfigRollout", "stalled", v1alpha1.ReasonProgressDeadlineExceeded)
	if got := leaderMetric(t, `nodeguard_rollout_progress_deadline_exceeded{rollout="stalled"}`); got != 1 {
		t.Errorf("nodeguard_rollout_progress_deadline_exceeded is %v, want 1", got)
	}

	// The Node recovers: the rollout goes on and completes.
	if err := nodes["green-a"].StartAgent(t.Context()); err != nil {
		t.Fatal(err)
	}
	agentStopped = false
	patchRollout(t, "stalled", map[string]any{"progressDeadlineSeconds": 600})
	waitRollout(t, "stalled", "Complete once green-a recovered", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, v1alpha1.ReasonAllNodesUpdated)
	})
}

// TestAnUnlabelledTargetIsNotEligible: a rollout of an existing ConfigMap
// that lacks the eligibility label says so, not that it is missing.
func TestAnUnlabelledTargetIsNotEligible(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: "unlabelled"},
		Data: map[string]string{contract.ConfigMapKey: framework.KubeletConfigHeader + "maxPods: 75\n"}}
	if _, err := env.Admin.CoreV1().ConfigMaps(configNamespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	createRollout(t, "unlabelled", rolloutSpec{selector: pool("green"), configMap: cm.Name})
	r := waitRollout(t, "unlabelled", "TargetNotEligible", func(r *v1alpha1.KubeletConfigRollout) bool {
		return progressing(r, v1alpha1.ReasonTargetNotEligible)
	})
	if c := condition(r, v1alpha1.ConditionProgressing); !strings.Contains(c.Message, contract.EligibleLabel) {
		t.Errorf("Progressing %q does not name the missing label", c.Message)
	}
}
