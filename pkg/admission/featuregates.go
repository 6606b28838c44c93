package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/disruption"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// admitFeatureGates is feature-gates (and config-content, for the content
// it names) for a Node write by anyone: a new
// assignment must decode, and be one the node's kubelet can run, as
// kubeletconfig.JudgeAssignment judges it (`kubectl nodeguard` judges with
// it too). Only a change of assignment is judged, so that a node's routine
// status updates never fail on a config that was accepted before.
func (a *Admitter) admitFeatureGates(_ context.Context, settings *settings.Settings, node, old *corev1.Node) Result {
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
	candidate := kubeletconfig.Candidate{ConfigMap: ref, Err: err, Mutable: cm.Immutable == nil || !*cm.Immutable}
	if err == nil {
		candidate.Config = checked.Config
	}
	reported := node.Status.NodeInfo.KubeletVersion
	judged := kubeletconfig.JudgeAssignment(candidate, node.Name, reported)
	switch {
	case judged.Refused && judged.NodeState:
		// A refusal for the node's own report concerns that node alone,
		// and says so, so that a rollout skips the node rather than fail
		// its pool for it.
		return refuseForNodeState(judged.Rule, "%s", judged.Message)
	case judged.Refused:
		return refuse(judged.Rule, "%s", judged.Message)
	}
	warnings := judged.Warnings
	// The node's own report decided its own assignment, even a lowered
	// one; a lowered report is named here, since it no longer counts for
	// the ConfigMaps the node shares (checkAssignedNodes).
	if parsed := judged.KubeletVersion; parsed != nil {
		if why := a.versions.distrust(node.Name, reported, parsed); why != "" {
			warnings = append(warnings, fmt.Sprintf("node %s %s; this assignment was judged by the version it reports now, but it no longer counts when config-content checks edits of the ConfigMaps it shares with other nodes against feature-gates", node.Name, why))
		}
	}
	if w := floorWarning(candidate, node, settings.AllocatableFloorPercent); w != "" {
		warnings = append(warnings, w)
	}
	return allow(warnings...)
}

// floorWarning warns of a configuration whose reservations leave the Node
// less of its capacity allocatable than the policy's floor
// (allocatableFloorPercent). The capacity is the Node's own report, so the
// warning is about that Node alone, and a warning only: what the kubelet
// reports after the change is what its trial judges.
func floorWarning(c kubeletconfig.Candidate, node *corev1.Node, percent int) string {
	if c.Config == nil || len(node.Status.Capacity) == 0 {
		return ""
	}
	below, err := disruption.BelowFloor(c.Config, node.Status.Capacity, percent)
	if err != nil || len(below) == 0 {
		return ""
	}
	return fmt.Sprintf("%s leaves node %s less than %d%% of its capacity allocatable (allocatableFloorPercent), as the Node reports its capacity: %s; pods it runs may no longer fit",
		c.ConfigMap, node.Name, percent, strings.Join(below, ", "))
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
