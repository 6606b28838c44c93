package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// admitAssignment is rule 5 for a Node write by anyone: a new assignment
// must be one the node's kubelet can run. Only a change of assignment is
// judged, so that a node's routine status updates never fail on a config
// that was accepted before.
func (a *Admitter) admitAssignment(_ context.Context, node, old *corev1.Node) Result {
	assigned, err := assignmentOf(node)
	if err != nil {
		return allow("the " + contract.ConfigSourceAnnotation + " annotation is malformed and assigns nothing: " + err.Error())
	}
	previous, _ := assignmentOf(old)
	if assigned == nil || sameAssignment(assigned, previous) {
		return allow()
	}
	ref := assigned.ConfigMap
	cm, err := a.eligibleConfigMap(ref)
	if err != nil {
		return refuse(RuleFeatureGates, "cannot check the assignment of %s to node %q: %v", ref, node.Name, err)
	}
	if cm == nil {
		return allow("ConfigMap " + ref.String() + " is not an eligible kubelet configuration (missing, or without the label " +
			contract.EligibleLabel + "=" + contract.EligibleLabelValue + "); node " + node.Name + " cannot read it and keeps its current configuration")
	}
	checked, err := a.configs.CheckConfigMapKey(cm, assigned.Key)
	if err == nil && checked.Err != nil {
		err = kubeletconfig.ConfigMapError(cm.Namespace, cm.Name, assigned.Key, checked.Err)
	}
	if err != nil {
		return refuse(RuleConfigContent, "cannot assign %s to node %q: %v", ref, node.Name, err)
	}
	cfg := checked.Config
	reported := node.Status.NodeInfo.KubeletVersion
	errs, err := kubeletconfig.CheckAssignment(cfg, reported)
	if err != nil {
		return allow("node " + node.Name + " reports no parseable kubelet version yet; the feature gates of " + ref.String() + " were not checked against it")
	}
	if len(errs) > 0 {
		return refuse(RuleFeatureGates, "cannot assign %s to node %q (kubelet %s): %v", ref, node.Name, reported, kubeletconfig.Summarize(errs))
	}
	return allow()
}
