package admission

import (
	"context"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/version"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

func (a *Admitter) admitNode(ctx context.Context, req *admissionv1.AdmissionRequest, policy *config.Policy, nodeName string, isNode, checkContent bool) Result {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update && req.Operation != admissionv1.Delete {
		return allow()
	}
	var node, old *corev1.Node
	var err error
	if req.Operation != admissionv1.Delete {
		if node, err = decodeNode(req.Object, "object"); err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		if node == nil {
			return refuse(RuleMalformed, "%s of a Node without the object", req.Operation)
		}
	}
	if req.Operation == admissionv1.Update {
		// Judging an update needs what it changes; without the old
		// object there is no safe answer.
		if old, err = decodeNode(req.OldObject, "oldObject"); err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		if old == nil {
			return refuse(RuleMalformed, "UPDATE of a Node without the old object")
		}
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
		if r := a.admitSelfAssignment(policy, nodeName, node, old); !r.Allowed {
			return r
		}
		if req.Operation == admissionv1.Create && req.SubResource == "" {
			if r := admitMinVersion(policy.MinKubeletVersion, nodeName, node); !r.Allowed {
				return r
			}
		}
	}
	if req.Operation == admissionv1.Delete || !checkContent {
		return allow()
	}
	return a.admitAssignment(ctx, node, old)
}

// admitOwnNode is rule 1. On CREATE the name comes from the object, since
// the request may carry none.
func admitOwnNode(req *admissionv1.AdmissionRequest, nodeName string, node *corev1.Node) Result {
	if nodeName == "" {
		return refuse(RuleOwnNode, "user %q is in group %s but does not name a node, so it may not write any Node",
			req.UserInfo.Username, contract.NodesGroup)
	}
	target := req.Name
	if req.Operation == admissionv1.Create && node != nil {
		target = node.Name
	}
	if target != nodeName {
		return refuse(RuleOwnNode, "node %q may not %s Node %q: a node may only write its own Node",
			nodeName, strings.ToLower(string(req.Operation)), target)
	}
	return allow()
}

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

// admitSelfAssignment is rule 3.
func (a *Admitter) admitSelfAssignment(policy *config.Policy, nodeName string, node, old *corev1.Node) Result {
	value := node.Annotations[contract.ConfigSourceAnnotation]
	if value == "" {
		return allow()
	}
	if old != nil && old.Annotations[contract.ConfigSourceAnnotation] == value {
		return allow()
	}
	if !policy.AllowNodeSelfAssignment {
		return refuse(RuleConfigSource, "node %q may not set its own %s annotation: the policy does not allow node self-assignment (allowNodeSelfAssignment); an administrator assigns configurations",
			nodeName, contract.ConfigSourceAnnotation)
	}
	ref, _, err := contract.ParseConfigSource(value)
	if err != nil {
		return refuse(RuleConfigSource, "node %q: %v", nodeName, err)
	}
	cm, err := a.eligibleConfigMap(ref)
	if err != nil {
		return refuse(RuleConfigSource, "node %q: %v", nodeName, err)
	}
	if cm == nil {
		return refuse(RuleConfigSource, "node %q may only assign itself an eligible ConfigMap: %s does not exist or lacks the label %s=%s",
			nodeName, ref, contract.EligibleLabel, contract.EligibleLabelValue)
	}
	return allow()
}

// admitMinVersion is rule 4. The version is self-reported: this keeps
// kubelets that cannot honour the configurations out, it does not stop a
// node that lies.
func admitMinVersion(min *version.Version, nodeName string, node *corev1.Node) Result {
	if min == nil {
		return allow()
	}
	reported := node.Status.NodeInfo.KubeletVersion
	if reported == "" {
		return refuse(RuleMinKubeletVersion, "node %q reports no kubelet version (status.nodeInfo.kubeletVersion) and the minimum is %s", nodeName, min)
	}
	v, err := version.ParseGeneric(reported)
	if err != nil {
		return refuse(RuleMinKubeletVersion, "node %q reports an unparseable kubelet version %q: %v", nodeName, reported, err)
	}
	if v.LessThan(min) {
		return refuse(RuleMinKubeletVersion, "node %q runs kubelet %s, below the minimum %s", nodeName, reported, min)
	}
	return allow()
}

// sameAssignment reports whether two optional assignments are equal.
func sameAssignment(a, b *contract.Assignment) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func assignmentChanged(node, old *corev1.Node) bool {
	a, errA := assignmentOf(node)
	b, errB := assignmentOf(old)
	return errA != nil || errB != nil || !sameAssignment(a, b)
}

func assignmentOf(node *corev1.Node) (*contract.Assignment, error) {
	if node == nil {
		return nil, nil
	}
	a, ok, err := contract.AssignmentOf(node)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}
