package admission

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// admitSelfAssignment is rule 3.
func (a *Admitter) admitSelfAssignment(settings *config.Settings, nodeName string, node, old *corev1.Node) Result {
	value := node.Annotations[contract.ConfigSourceAnnotation]
	if value == "" {
		return allow()
	}
	if old != nil && old.Annotations[contract.ConfigSourceAnnotation] == value {
		return allow()
	}
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
	return allow()
}

// admitRolloutBookkeeping is rule 3 for a rollout's bookkeeping: a node may
// not add, change or remove it on its own Node. A node that could write
// previous-config-source would have the next revert assign it whatever
// eligible ConfigMap it chose, which is self-assignment by another name.
func admitRolloutBookkeeping(nodeName string, node, old *corev1.Node) Result {
	for _, key := range v1alpha1.BookkeepingAnnotations {
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
