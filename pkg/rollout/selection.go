package rollout

import (
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// Selector is the rollout's node selector. An empty selector is an error
// rather than every Node: the CRD refuses it, and a rollout that got past
// that (an apiserver without the CRD's validation rules, a unit test)
// must not take the whole cluster.
func Selector(r *v1alpha1.KubeletConfigRollout) (labels.Selector, error) {
	s := &r.Spec.NodeSelector
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return nil, errors.New("spec.nodeSelector is empty")
	}
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("spec.nodeSelector: %w", err)
	}
	return selector, nil
}

// OtherRollouts names, sorted, the rollouts other than self whose
// selectors pick a Node with these labels: what NodeObservation's
// OtherRollouts wants. A rollout whose selector does not parse selects
// nothing; its own status says why.
func OtherRollouts(rollouts []*v1alpha1.KubeletConfigRollout, self string, nodeLabels labels.Set) []string {
	var out []string
	for _, r := range rollouts {
		if r.Name == self {
			continue
		}
		if selector, err := Selector(r); err == nil && selector.Matches(nodeLabels) {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}
