package admission

import (
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// admitOwnNode is rule 1. On CREATE the name comes from the object, since
// the request may carry none.
func admitOwnNode(req *admissionv1.AdmissionRequest, nodeName string, node *corev1.Node) Result {
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
