package admission

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

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
