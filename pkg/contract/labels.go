package contract

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

const (
	// Domain is nodeguard's own label and annotation prefix. Labels under
	// it are the administrator's word: no node may add, change or remove
	// them on its Node (the node-restriction rule), so a pool selected on them cannot be
	// joined by a node on its own.
	Domain = "nodeguard.dev"

	// PoolLabel is the Node label the shipped examples, the demo and the
	// pool_naming policy read as a Node's pool.
	PoolLabel = Domain + "/pool"

	// CauseNodeState marks, in the details of an admission refusal, a
	// refusal that concerns the target Node's own reported state (its
	// kubelet version under the feature-gates rule, a policy on its labels) rather than
	// the configuration assigned: the rollout controller skips that Node
	// and goes on with the others instead of failing the pool.
	CauseNodeState metav1.CauseType = Domain + "/NodeState"
)

// NodeReservedLabels names, for messages, the labels NodeMayWriteLabel
// refuses to nodes.
const NodeReservedLabels = "node-restriction.kubernetes.io, " + Domain + ", or kubernetes.io/k8s.io outside the kubelet's own labels"

// NodeMayWriteLabel reports whether a node may add, change or remove the
// label key on its own Node (the node-restriction rule): not under
// node-restriction.kubernetes.io, nor kubernetes.io or k8s.io outside the
// kubelet's own labels, nor nodeguard.dev, each with its subdomains.
func NodeMayWriteLabel(key string) bool {
	domain, _, hasDomain := strings.Cut(key, "/")
	if !hasDomain {
		return true
	}
	switch {
	case inDomain(domain, corev1.LabelNamespaceNodeRestriction), inDomain(domain, Domain):
		return false
	case inDomain(domain, "kubernetes.io"), inDomain(domain, "k8s.io"):
		return kubeletapis.IsKubeletLabel(key)
	}
	return true
}

// inDomain reports whether domain is d or a subdomain of it.
func inDomain(domain, d string) bool { return domain == d || strings.HasSuffix(domain, "."+d) }
