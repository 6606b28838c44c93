package admission

import (
	"context"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// admitNode judges a write of a Node (nodes or nodes/status): own-node,
// node-restriction, config-source and min-kubelet-version for nodes, in
// order, then feature-gates for everyone the
// content rules apply to.
func (a *Admitter) admitNode(ctx context.Context, req *Request, settings *settings.Settings, nodeName string, isNode, checkContent bool) Result {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update && req.Operation != admissionv1.Delete {
		return allow()
	}
	node, _ := req.Obj.(*corev1.Node)
	old, _ := req.OldObj.(*corev1.Node)
	if req.Operation == admissionv1.Delete {
		node, old = nil, nil
	} else if node == nil {
		return refuse(RuleMalformed, "%s of a Node without the object", req.Operation)
	}
	if req.Operation != admissionv1.Update {
		old = nil
	} else if old == nil {
		// Judging an update needs what it changes; without the old
		// object there is no safe answer.
		return refuse(RuleMalformed, "UPDATE of a Node without the old object")
	}
	if isNode {
		if r := admitOwnNode(req, nodeName, node); !r.Allowed {
			return r
		}
		if req.Operation == admissionv1.Delete {
			return allow()
		}
		if r := admitNodeRestriction(nodeName, node, old); !r.Allowed {
			return r
		}
		if r := a.admitConfigSource(settings, nodeName, node, old); !r.Allowed {
			return r
		}
		if req.Operation == admissionv1.Create && req.SubResource == "" {
			if r := admitMinKubeletVersion(settings.MinKubeletVersion, nodeName, node); !r.Allowed {
				return r
			}
		}
	}
	if req.Operation == admissionv1.Delete || !checkContent {
		return allow()
	}
	// The feature-gates rule (featuregates.go) judges everyone's
	// assignments, not only a node's.
	return a.admitFeatureGates(ctx, settings, node, old)
}

// admitOwnNode is own-node: a node writes only its own Node. On
// CREATE the name comes from the object, since the request may carry none.
func admitOwnNode(req *Request, nodeName string, node *corev1.Node) Result {
	if nodeName == "" {
		return refuse(contract.RuleOwnNode, "user %q is in group %s but does not name a node, so it may not write any Node",
			req.UserInfo.Username, contract.NodesGroup)
	}
	target := req.Name
	if req.Operation == admissionv1.Create && node != nil {
		target = node.Name
	}
	if target != nodeName {
		return refuse(contract.RuleOwnNode, "node %q may not %s Node %q: a node may only write its own Node",
			nodeName, strings.ToLower(string(req.Operation)), target)
	}
	return allow()
}

// admitNodeRestriction is node-restriction, as the in-tree
// NodeRestriction plugin has it, and stricter on two points: a node may not
// set ownerReferences at registration either (CVE-2025-5187 showed what a
// node can do with them), and no nodeguard.dev label is a node's to write,
// at registration or after, so that a pool selected on one cannot be joined
// by a node on its own (a rollout would assign it the pool's configuration:
// self-assignment by another name).
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

// admitConfigSource is config-source: a node sets its
// config-source annotation only where the settings allow self-assignment,
// and only to an eligible ConfigMap; clearing it is always allowed. Nor may
// a node add, change or remove a rollout's bookkeeping on its own Node: one
// that could write previous-config-source would have the next revert assign
// it whatever eligible ConfigMap it chose, which is self-assignment by
// another name.
func (a *Admitter) admitConfigSource(settings *settings.Settings, nodeName string, node, old *corev1.Node) Result {
	if value := node.Annotations[contract.ConfigSourceAnnotation]; value != "" &&
		(old == nil || old.Annotations[contract.ConfigSourceAnnotation] != value) {
		if !settings.AllowNodeSelfAssignment {
			return refuse(contract.RuleConfigSource, "node %q may not set its own %s annotation: the policy does not allow node self-assignment (allowNodeSelfAssignment); an administrator assigns configurations",
				nodeName, contract.ConfigSourceAnnotation)
		}
		ref, _, err := contract.ParseConfigSource(value)
		if err != nil {
			return refuse(contract.RuleConfigSource, "node %q: %v", nodeName, err)
		}
		cm, err := a.eligibleConfigMap(ref)
		if err != nil {
			return refuse(contract.RuleConfigSource, "node %q: %v", nodeName, err)
		}
		if cm == nil {
			return refuse(contract.RuleConfigSource, "node %q may only assign itself an eligible ConfigMap: %s does not exist or lacks the label %s=%s",
				nodeName, ref, contract.EligibleLabel, contract.EligibleLabelValue)
		}
	}
	for _, key := range contract.BookkeepingAnnotations {
		value, has := node.Annotations[key]
		var oldValue string
		var oldHas bool
		if old != nil {
			oldValue, oldHas = old.Annotations[key]
		}
		if has != oldHas || value != oldValue {
			return refuse(contract.RuleConfigSource, "node %q may not add, change or remove its %s annotation: only the KubeletConfigRollout controller keeps it",
				nodeName, key)
		}
	}
	return allow()
}

// admitMinKubeletVersion is min-kubelet-version: a node below the
// minimum may not register. The version is self-reported: this keeps
// kubelets that cannot honour the configurations out, it does not stop a
// node that lies.
func admitMinKubeletVersion(min *version.Version, nodeName string, node *corev1.Node) Result {
	if min == nil {
		return allow()
	}
	reported := node.Status.NodeInfo.KubeletVersion
	if reported == "" {
		return refuse(contract.RuleMinKubeletVersion, "node %q reports no kubelet version (status.nodeInfo.kubeletVersion) and the minimum is %s", nodeName, min)
	}
	v, err := version.ParseGeneric(reported)
	if err != nil {
		return refuse(contract.RuleMinKubeletVersion, "node %q reports an unparseable kubelet version %q: %v", nodeName, reported, err)
	}
	if v.LessThan(min) {
		return refuse(contract.RuleMinKubeletVersion, "node %q runs kubelet %s, below the minimum %s", nodeName, reported, min)
	}
	return allow()
}
