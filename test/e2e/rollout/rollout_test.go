package rollout_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestGoodConfigurationReachesEverySelectedNode: a good configuration
// reaches every blue Node and no other, and a watch on the Nodes never sees
// more of them unavailable than maxUnavailable: judged from what their
// kubelets and agents report, not from the controller's bookkeeping.
func TestGoodConfigurationReachesEverySelectedNode(t *testing.T) {
	settle(t, blue...)
	others := append(append([]string(nil), green...), slowNode)
	before := sources(t, others)
	cm := configMap(t, "good-61", "maxPods: 61\n")
	watch := watchUnavailability(t, blue)
	createRollout(t, "good", rolloutSpec{selector: pool("blue"), configMap: cm.Name, maxUnavailable: 2})
	r := waitRollout(t, "good", "Complete", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, v1alpha1.ReasonAllNodesUpdated)
	})
	waitRuns(t, blue, cm)
	watch.stop()
	if most, which := watch.Most(); most > 2 {
		t.Errorf("%d Nodes unavailable at once (%s), maxUnavailable is 2", most, which)
	} else {
		t.Logf("at most %d Nodes unavailable at once (%s)", most, which)
	}
	if r.Status.Selected != int32(len(blue)) || r.Status.Updated != int32(len(blue)) {
		t.Errorf("status: %s", describe(r))
	}
	for _, name := range blue {
		n := node(t, name)
		if got := n.Annotations[contract.ConfigSourceAnnotation]; got != configNamespace+"/"+cm.Name {
			t.Errorf("%s: config-source %q", name, got)
		}
		if !slices.ContainsFunc(n.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == "nodeguard-rollout-controller" }) {
			t.Errorf("%s: no managedFields entry of the controller's field manager", name)
		}
	}
	if after := sources(t, others); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Nodes outside the selection moved: %v -> %v", before, after)
	}
	if got := leaderMetric(t, `nodeguard_rollout_nodes{rollout="good",state="Updated"}`); got != float64(len(blue)) {
		t.Errorf("the leader's nodeguard_rollout_nodes Updated is %v, want %d", got, len(blue))
	}
	waitEvent(t, "Node", "blue-d", "Assigned")
	waitEvent(t, "KubeletConfigRollout", "good", v1alpha1.ReasonComplete)
}

// TestCanaryFailure: a configuration that makes the kubelet exit at
// start-up fails on the canary; the rollout is Failed naming it, no other
// Node is assigned or restarted, and the canary is back on its previous
// configuration.
func TestCanaryFailure(t *testing.T) {
	settle(t, blue...)
	before := sources(t, blue)
	restarts := map[string]int{}
	for _, name := range blue {
		restarts[name] = journalLen(t, name)
	}
	previous, err := nodes["blue-a"].Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cm := configMap(t, "crashing", "maxPods: 62\n"+framework.CrashingKubelet())
	createRollout(t, "canary-fails", rolloutSpec{selector: pool("blue"), configMap: cm.Name, maxUnavailable: 3})
	r := waitRollout(t, "canary-fails", "Failed and reverted", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionFailed, v1alpha1.ReasonTrialFailed) && progressing(r, v1alpha1.ReasonReverted)
	})
	if msg := condition(r, v1alpha1.ConditionFailed).Message; !strings.Contains(msg, "Node blue-a") {
		t.Errorf("Failed does not name the canary: %q", msg)
	}
	if got := source(t, "blue-a"); got != before["blue-a"] {
		t.Errorf("canary config-source %q, want its previous %q", got, before["blue-a"])
	}
	if _, err := nodes["blue-a"].WaitReport(t.Context(), waitTimeout, "the canary back on its previous configuration", func(o framework.Report) bool {
		return o.Condition != nil && o.Condition.Status == corev1.ConditionTrue && fmt.Sprint(o.Status.Active) == fmt.Sprint(previous.Status.Active)
	}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, "KubeletConfigRollout", "canary-fails", "RolloutFailed")
	waitEvent(t, "Node", "blue-a", "Reverted")
	for _, name := range blue[1:] {
		if got := source(t, name); got != before[name] {
			t.Errorf("%s moved: %q -> %q", name, before[name], got)
		}
		if n := journalLen(t, name); n != restarts[name] {
			t.Errorf("%s's kubelet restarted %d times during the rollout", name, n-restarts[name])
		}
	}
}

// laterBatch rolls a configuration out over green-a, green-b and slow-z,
// in that order one at a time, and fails slow-z's trial (the last batch) by
// stopping its kubelet through its unit while the trial runs: the agent's
// health checks fail and it rolls the configuration back.
func laterBatch(t *testing.T, name string, policy v1alpha1.FailurePolicy) (*v1alpha1.KubeletConfigRollout, map[string]string) {
	t.Helper()
	names := append(append([]string(nil), green...), slowNode)
	settle(t, names...)
	before := sources(t, names)
	cm := configMap(t, name, fmt.Sprintf("maxPods: %d\n", 63+len(policy)))
	createRollout(t, name, rolloutSpec{
		selector:  metav1LabelIn(contract.PoolLabel, "green", "slow"),
		configMap: cm.Name, maxUnavailable: 1, onFailure: policy,
	})
	waitRuns(t, green, cm)
	if _, err := nodes[slowNode].WaitReport(t.Context(), waitTimeout, slowNode+" trying "+cm.Name, func(o framework.Report) bool {
		return framework.RefersTo(o.Status.Active, cm) && !framework.RefersTo(o.Status.LastKnownGood, cm)
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := nodes[slowNode].Systemctl(t.Context(), "stop"); err != nil {
		t.Fatalf("stopping the kubelet of %s: %q, %v", slowNode, out, err)
	}
	r := waitRollout(t, name, "Failed on "+slowNode, func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionFailed, v1alpha1.ReasonTrialFailed) &&
			(progressing(r, v1alpha1.ReasonReverted) || progressing(r, v1alpha1.ReasonHalted))
	})
	if msg := condition(r, v1alpha1.ConditionFailed).Message; !strings.Contains(msg, "Node "+slowNode) {
		t.Errorf("Failed does not name %s: %q", slowNode, msg)
	}
	return r, before
}

// TestLaterBatchFailureReverts: a failure in the last batch stops the
// rollout and, with onFailure Revert, re-points that batch and the earlier
// ones to what they had before.
func TestLaterBatchFailureReverts(t *testing.T) {
	_, before := laterBatch(t, "later-revert", v1alpha1.FailureRevert)
	for _, name := range append(append([]string(nil), green...), slowNode) {
		if got := source(t, name); got != before[name] {
			t.Errorf("%s: config-source %q, want its previous %q", name, got, before[name])
		}
	}
}

// TestLaterBatchFailureHalts: with onFailure Halt the same failure leaves
// every Node as it is: the earlier batches keep the configuration.
func TestLaterBatchFailureHalts(t *testing.T) {
	_, _ = laterBatch(t, "later-halt", v1alpha1.FailureHalt)
	holds(t, 3*trialPeriod, "a halted rollout leaves its Nodes", func() (bool, string) {
		got := sources(t, append(append([]string(nil), green...), slowNode))
		for name, src := range got {
			if src != configNamespace+"/later-halt" {
				return false, fmt.Sprintf("%s: %q", name, src)
			}
		}
		return true, ""
	})
}
