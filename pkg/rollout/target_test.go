package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func TestTargetOfIsTheVersionOfAnEligibleConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v3.Namespace, Name: v3.Name, UID: "uid-v3", ResourceVersion: "30",
		Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}}}
	if got, ineligible := TargetOf(cm); got == nil || *got != v3 || ineligible {
		t.Errorf("TargetOf(eligible) = %v, %v, want %v, false", got, ineligible, v3)
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}
	if got, ineligible := TargetOf(meta); got == nil || *got != v3 || ineligible {
		t.Errorf("TargetOf(metadata) = %v, %v, want %v, false", got, ineligible, v3)
	}
	cm.Labels[contract.EligibleLabel] = "false"
	if got, ineligible := TargetOf(cm); got != nil || !ineligible {
		t.Errorf("TargetOf(not eligible) = %v, %v, want nil, true", got, ineligible)
	}
	if got, ineligible := TargetOf(nil); got != nil || ineligible {
		t.Errorf("TargetOf(nil) = %v, %v, want nil, false", got, ineligible)
	}
}
