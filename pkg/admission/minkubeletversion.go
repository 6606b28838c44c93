package admission

import (
	"github.com/nodeguard/nodeguard/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// admitMinVersion is rule 4. The version is self-reported: this keeps
// kubelets that cannot honour the configurations out, it does not stop a
// node that lies.
func admitMinVersion(min *version.Version, nodeName string, node *corev1.Node) Result {
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
