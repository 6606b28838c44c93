package rollout_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestRolloutPointingAtNothing: a rollout whose ConfigMap does not exist
// (TargetNotFound), and then exists but is not eligible
// (TargetNotEligible), says so in its status and moves no Node; once the
// ConfigMap is eligible it rolls out.
func TestRolloutPointingAtNothing(t *testing.T) {
	settle(t, green...)
	before := sources(t, green)
	createRollout(t, "nothing", rolloutSpec{selector: pool("green"), configMap: "nothing-73", maxUnavailable: 1})
	waitRollout(t, "nothing", "TargetNotFound for a missing ConfigMap", func(r *v1alpha1.KubeletConfigRollout) bool {
		return progressing(r, v1alpha1.ReasonTargetNotFound)
	})

	plain := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: "nothing-73"},
		Data:       map[string]string{contract.ConfigMapKey: framework.KubeletConfigHeader + "maxPods: 73\n"},
	}
	if _, err := env.Admin.CoreV1().ConfigMaps(configNamespace).Create(t.Context(), plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	holds(t, 3*trialPeriod, "no Node assigned a ConfigMap that is not eligible", func() (bool, string) {
		r, err := getRollout(t.Context(), "nothing")
		if err != nil {
			return false, err.Error()
		}
		now := sources(t, green)
		// Missing until the controller syncs the rollout again, then not
		// eligible (pkg/rollout/controller
		// TestAnIneligibleTargetIsReportedAsSuch): either
		// way no Node moves.
		waiting := progressing(r, v1alpha1.ReasonTargetNotFound) || progressing(r, v1alpha1.ReasonTargetNotEligible)
		return waiting && fmt.Sprint(now) == fmt.Sprint(before), describe(r) + " " + fmt.Sprint(now)
	})

	label := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, contract.EligibleLabel, contract.EligibleLabelValue)
	cm, err := env.Admin.CoreV1().ConfigMaps(configNamespace).Patch(t.Context(), plain.Name, types.MergePatchType, label, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRollout(t, "nothing", "Complete once the ConfigMap is eligible", func(r *v1alpha1.KubeletConfigRollout) bool {
		return isTrue(r, v1alpha1.ConditionComplete, v1alpha1.ReasonAllNodesUpdated)
	})
	waitRuns(t, green, cm)
}
