package admission

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// admitNodeRestriction is rule 2, as the in-tree NodeRestriction plugin
// has it, and stricter on one point: a node may not set ownerReferences at
// registration either (CVE-2025-5187 showed what a node can do with them).
func admitNodeRestriction(nodeName string, node, old *corev1.Node) Result {
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	if forbidden := forbiddenLabels(modifiedLabels(node.Labels, oldLabels)); len(forbidden) > 0 {
		return refuse(RuleNodeRestriction, "node %q may not set, change or remove the labels %s: they are reserved to the control plane (node-restriction.kubernetes.io, or kubernetes.io/k8s.io outside the kubelet's own labels)",
			nodeName, strings.Join(forbidden, ", "))
	}
	if old == nil {
		if len(node.OwnerReferences) > 0 {
			return refuse(RuleNodeRestriction, "node %q may not register with ownerReferences", nodeName)
		}
		if node.Spec.ConfigSource != nil {
			return refuse(RuleNodeRestriction, "node %q may not register with a spec.configSource", nodeName)
		}
		return allow()
	}
	if !apiequality.Semantic.DeepEqual(node.Spec.Taints, old.Spec.Taints) {
		return refuse(RuleNodeRestriction, "node %q may not change its taints", nodeName)
	}
	if !apiequality.Semantic.DeepEqual(node.OwnerReferences, old.OwnerReferences) {
		return refuse(RuleNodeRestriction, "node %q may not change its ownerReferences", nodeName)
	}
	if node.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(node.Spec.ConfigSource, old.Spec.ConfigSource) {
		return refuse(RuleNodeRestriction, "node %q may not set spec.configSource; assignments use the %s annotation",
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

func forbiddenLabels(keys []string) []string {
	var forbidden []string
	for _, key := range keys {
		domain, _, hasDomain := strings.Cut(key, "/")
		if !hasDomain {
			continue
		}
		if inDomain(domain, corev1.LabelNamespaceNodeRestriction) ||
			((inDomain(domain, "kubernetes.io") || inDomain(domain, "k8s.io")) && !kubeletapis.IsKubeletLabel(key)) {
			forbidden = append(forbidden, key)
		}
	}
	return forbidden
}

// inDomain reports whether domain is d or a subdomain of it.
func inDomain(domain, d string) bool { return domain == d || strings.HasSuffix(domain, "."+d) }
