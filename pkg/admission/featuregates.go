package admission

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

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
		return refuse(contract.RuleFeatureGates, "cannot check the assignment of %s to node %q: %v", ref, node.Name, err)
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
		return refuse(contract.RuleConfigContent, "cannot assign %s to node %q: %v", ref, node.Name, err)
	}
	cfg := checked.Config
	var warnings []string
	if cm.Immutable == nil || !*cm.Immutable {
		warnings = append(warnings, MutableConfigMapWarning(ref.String(), node.Name))
	}
	reported := node.Status.NodeInfo.KubeletVersion
	parsed, err := version.ParseGeneric(reported)
	if err != nil {
		// Judged without the node's say: a gate no kubelet knows is refused
		// whatever it reports.
		if errs := checkEveryKnownKubelet(cfg); len(errs) > 0 {
			return refuse(contract.RuleFeatureGates, "cannot assign %s to node %q: it reports no parseable kubelet version (%q), and no kubelet nodeguard knows (%s) can run it: %v",
				ref, node.Name, reported, knownKubelets(), kubeletconfig.Summarize(errs))
		}
		return allow(append(warnings, fmt.Sprintf("node %s reports no parseable kubelet version (%q); %s was judged against every kubelet nodeguard knows (%s), not its own",
			node.Name, reported, ref, knownKubelets()))...)
	}
	// The node's own report decides its own assignment, even a lowered one:
	// a refusal here concerns that node alone, and says so, so that a
	// rollout skips the node rather than fail its pool for it. (A
	// configuration no kubelet can run, above, is refused for what it is.)
	if errs := kubeletconfig.CheckFeatureGates(cfg, parsed); len(errs) > 0 {
		return refuseForNodeState(contract.RuleFeatureGates, "cannot assign %s to node %q (kubelet %s): %v", ref, node.Name, reported, kubeletconfig.Summarize(errs))
	}
	if why := a.versions.distrust(node.Name, reported, parsed); why != "" {
		return allow(append(warnings, fmt.Sprintf("node %s %s; this assignment was judged by the version it reports now, but it no longer counts in rule 5 for edits of the ConfigMaps it shares with other nodes", node.Name, why))...)
	}
	return allow(warnings...)
}

// MutableConfigMapWarning is the warning on assigning a ConfigMap that is
// not immutable. Revoking a node's access does not reach a watch it already
// has open (authorization is decided when a watch starts), so edits of a
// mutable ConfigMap keep arriving after the assignment or the label is
// gone; a configuration that never changes has nothing more to deliver.
func MutableConfigMapWarning(ref, node string) string {
	return fmt.Sprintf("ConfigMap %s is mutable: once node %s has it open, its edits keep reaching the node after the assignment or the label is removed (a watch is authorized when it starts); "+
		"prefer one immutable ConfigMap per revision (immutable: true, a new name for each change, as 'kubectl nodeguard create' makes them)", ref, node)
}

// checkAssignedNodes applies rule 5 to every node the ConfigMap is
// assigned to: an edit must not break a node already running it. A node
// whose reported version is not trusted (see KubeletVersions) does not get
// a say: it is named in a warning, and the configuration must only be one
// that some kubelet nodeguard knows can run.
func (a *Admitter) checkAssignedNodes(ref contract.ConfigMapRef, cfg *kubeletconfigv1beta1.KubeletConfiguration) Result {
	var broken, marked []string
	var first, detail string
	var unchecked int
	// A pool runs a handful of kubelet versions: check each once.
	verdicts := map[string]field.ErrorList{}
	for _, name := range a.graph.NodesAssignedTo(ref.Namespace, ref.Name) {
		info, ok := a.graph.Node(name)
		if !ok {
			unchecked++
			continue
		}
		if why := a.versions.distrust(name, info.KubeletVersion, info.ParsedKubeletVersion); why != "" {
			marked = append(marked, name+" ("+why+")")
			continue
		}
		errs, checked := verdicts[info.KubeletVersion]
		if !checked {
			errs = kubeletconfig.CheckFeatureGates(cfg, info.ParsedKubeletVersion)
			verdicts[info.KubeletVersion] = errs
		}
		if len(errs) > 0 {
			// The graph lists nodes in no order: name the first by name,
			// so that a refusal reads the same every time.
			if first == "" || name < first {
				first, detail = name, fmt.Sprintf("node %s (kubelet %s): %v", name, info.KubeletVersion, kubeletconfig.Summarize(errs))
			}
			broken = append(broken, name)
		}
	}
	if len(broken) > 0 {
		return refuse(contract.RuleFeatureGates, "ConfigMap %s is assigned to nodes whose kubelets cannot run it: %s; first: %s",
			ref, listNodes(broken), detail)
	}
	var warnings []string
	if len(marked) > 0 {
		slices.Sort(marked)
		if errs := checkEveryKnownKubelet(cfg); len(errs) > 0 {
			return refuse(contract.RuleFeatureGates, "ConfigMap %s is assigned to nodes whose reported kubelet version is not trusted (%s), and no kubelet nodeguard knows (%s) can run it: %v",
				ref, listNodes(marked), knownKubelets(), kubeletconfig.Summarize(errs))
		}
		warnings = append(warnings, fmt.Sprintf("ConfigMap %s: nodes whose reported kubelet version is not trusted were judged against every kubelet nodeguard knows (%s), not their own: %s",
			ref, knownKubelets(), listNodes(marked)))
	}
	if unchecked > 0 {
		warnings = append(warnings, fmt.Sprintf("%d node(s) assigned %s are not known yet; their feature gates were not checked", unchecked, ref))
	}
	return allow(warnings...)
}

// sameAssignment reports whether two optional assignments are equal.
func sameAssignment(a, b *contract.Assignment) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
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
