package admission

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// admitNodeRestriction is rule 2, as the in-tree NodeRestriction plugin
// has it, and stricter on two points: a node may not set ownerReferences at
// registration either (CVE-2025-5187 showed what a node can do with them),
// and no nodeguard.dev label is a node's to write, at registration or
// after, so that a pool selected on one cannot be joined by a node on its
// own (a rollout would assign it the pool's configuration: self-assignment
// by another name).
func admitNodeRestriction(nodeName string, node, old *corev1.Node) Result {
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	if forbidden := forbiddenLabels(modifiedLabels(node.Labels, oldLabels)); len(forbidden) > 0 {
		return refuse(contract.RuleNodeRestriction, "node %q may not set, change or remove the labels %s: they are reserved to the control plane and the administrator (%s)",
			nodeName, strings.Join(forbidden, ", "), contract.NodeReservedLabels)
	}
	if old == nil {
		if len(node.OwnerReferences) > 0 {
			return refuse(contract.RuleNodeRestriction, "node %q may not register with ownerReferences", nodeName)
		}
		if node.Spec.ConfigSource != nil {
			return refuse(contract.RuleNodeRestriction, "node %q may not register with a spec.configSource", nodeName)
		}
		return allow()
	}
	if !apiequality.Semantic.DeepEqual(node.Spec.Taints, old.Spec.Taints) {
		return refuse(contract.RuleNodeRestriction, "node %q may not change its taints", nodeName)
	}
	if !apiequality.Semantic.DeepEqual(node.OwnerReferences, old.OwnerReferences) {
		return refuse(contract.RuleNodeRestriction, "node %q may not change its ownerReferences", nodeName)
	}
	if node.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(node.Spec.ConfigSource, old.Spec.ConfigSource) {
		return refuse(contract.RuleNodeRestriction, "node %q may not set spec.configSource; assignments use the %s annotation",
			nodeName, contract.ConfigSourceAnnotation)
	}
	return allow()
}

func modifiedLabels(labels, old map[string]string) []string {
	modified := sets.New[string]()
	for k, v := range labels {
		if ov, ok := old[k]; !ok || ov != v {
			modified.Insert(k)
		}
	}
	for k := range old {
		if _, ok := labels[k]; !ok {
			modified.Insert(k)
		}
	}
	return sets.List(modified)
}

// forbiddenLabels are the keys a node may not write (contract.NodeMayWriteLabel,
// which the rollout selector rule reads too).
func forbiddenLabels(keys []string) []string {
	var forbidden []string
	for _, key := range keys {
		if !contract.NodeMayWriteLabel(key) {
			forbidden = append(forbidden, key)
		}
	}
	return forbidden
}
