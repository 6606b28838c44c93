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
	if got := TargetOf(cm); got == nil || *got != v3 {
		t.Errorf("TargetOf(eligible) = %v, want %v", got, v3)
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}
	if got := TargetOf(meta); got == nil || *got != v3 {
		t.Errorf("TargetOf(metadata) = %v, want %v", got, v3)
	}
	cm.Labels[contract.EligibleLabel] = "false"
	if got := TargetOf(cm); got != nil {
		t.Errorf("TargetOf(not eligible) = %v, want nil", got)
	}
	if got := TargetOf(nil); got != nil {
		t.Errorf("TargetOf(nil) = %v, want nil", got)
	}
}
