package rollout

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// ObserveSelected is Input.Nodes for the rollout named self: the Nodes
// among nodes that selector (Selector's, of that rollout) picks, each
// observed with the other rollouts that pick it too. nodes may be all
// Nodes or already filtered by the selector; rollouts are all the
// rollouts, self included or not. Anything that reads a rollout's Nodes
// (the controller, kubectl nodeguard rollout status) assembles them this
// way, so that all of them judge the same Nodes the same way.
//
// The error joins what could not be read on the Nodes (see ObserveNode);
// every selected Node is observed all the same.
func ObserveSelected(selector labels.Selector, self string, rollouts []*v1alpha1.KubeletConfigRollout, nodes []*corev1.Node) ([]NodeObservation, error) {
	var out []NodeObservation
	var errs []error
	for _, node := range nodes {
		set := labels.Set(node.Labels)
		if !selector.Matches(set) {
			continue
		}
		obs, err := ObserveNode(node, OtherRollouts(rollouts, self, set))
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, obs)
	}
	return out, errors.Join(errs...)
}
