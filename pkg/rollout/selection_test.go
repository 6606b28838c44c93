package rollout

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

func selecting(name string, selector metav1.LabelSelector) *v1alpha1.KubeletConfigRollout {
	r := newRollout()
	r.Name = name
	r.Spec.NodeSelector = selector
	return r
}

func TestSelectorRefusesAnEmptySelector(t *testing.T) {
	if _, err := Selector(selecting("empty", metav1.LabelSelector{})); err == nil {
		t.Error("an empty selector selects, want an error")
	}
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Is"}}}
	if _, err := Selector(selecting("bad", bad)); err == nil {
		t.Error("an unknown operator selects, want an error")
	}
}

func TestOtherRolloutsNameTheRolloutsSharingANode(t *testing.T) {
	rollouts := []*v1alpha1.KubeletConfigRollout{
		selecting("pool-blue", metav1.LabelSelector{MatchLabels: map[string]string{"pool": "blue"}}),
		selecting("zone-a", metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}),
		selecting("gpu", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu", Operator: metav1.LabelSelectorOpExists}}}),
		selecting("all-blue", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"blue"}}}}),
		selecting("empty", metav1.LabelSelector{}),
	}
	got := OtherRollouts(rollouts, "pool-blue", labels.Set{"pool": "blue", "zone": "a"})
	if want := []string{"all-blue", "zone-a"}; !slices.Equal(got, want) {
		t.Errorf("OtherRollouts = %v, want %v", got, want)
	}
	if got := OtherRollouts(rollouts, "pool-blue", labels.Set{"pool": "green"}); len(got) != 0 {
		t.Errorf("OtherRollouts of an unselected Node = %v, want none", got)
	}
}
