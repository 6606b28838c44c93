package rollout

import (
	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Undo is the Change that puts a Node back where it was before the rollout
// moved it, the very Change a revert makes: config-source back to the
// previous source (removed when there was none) and the bookkeeping
// removed. ok is false when the Node is not the rollout's to undo.
//
// A Node is the rollout's when its nodeguard.dev/rollout names it and its
// config-source still names the rollout's target, either spec.configMapRef
// or status.target (they differ while a revert of an old target is
// finishing, or before the controller has seen a new configMapRef). A Node
// someone re-pointed since is left alone, as a revert leaves it. Unlike a
// revert, Undo does not ask whether the Node is still selected: the
// bookkeeping on it says this rollout moved it, which is what an operator
// undoing the rollout means, and a Node that left the selection is no
// longer the controller's to revert.
func Undo(r *v1alpha1.KubeletConfigRollout, obs *NodeObservation) (change Change, ok bool) {
	if obs.Rollout != r.Name || obs.ConfigSource == nil {
		return Change{}, false
	}
	targets := []string{contract.ConfigMapRef{Namespace: r.Spec.ConfigMapRef.Namespace, Name: r.Spec.ConfigMapRef.Name}.String()}
	if t := r.Status.Target; t != nil {
		targets = append(targets, contract.ConfigMapRef{Namespace: t.Namespace, Name: t.Name}.String())
	}
	for _, target := range targets {
		if *obs.ConfigSource == target {
			return revert(obs), true
		}
	}
	return Change{}, false
}
