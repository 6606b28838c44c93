package contract

import "strings"

const (
	// EligibleLabel marks a ConfigMap that may be assigned to, and read by,
	// nodes as a kubelet configuration. Only the value EligibleLabelValue
	// counts.
	EligibleLabel      = "nodeguard.dev/kubelet-config"
	EligibleLabelValue = "true"

	// ConfigMapKey is the data key holding the KubeletConfiguration.
	ConfigMapKey = "kubelet"

	// ConfigSourceAnnotation on a Node carries its assignment as
	// "<namespace>/<name>"; absent or empty means the node's local config.
	ConfigSourceAnnotation = "nodeguard.dev/config-source"

	// ConfigStatusAnnotation on a Node carries the agent's ConfigStatus as JSON.
	ConfigStatusAnnotation = "nodeguard.dev/config-status"

	// ConditionKubeletConfigReady is the Node condition summarising the status.
	ConditionKubeletConfigReady = "KubeletConfigReady"

	// NodesGroup and NodeUserPrefix identify node credentials.
	NodesGroup     = "system:nodes"
	NodeUserPrefix = "system:node:"
)

// IsEligible reports whether a ConfigMap with these labels is an eligible
// kubelet configuration.
func IsEligible(labels map[string]string) bool {
	return labels[EligibleLabel] == EligibleLabelValue
}

// NodeIdentity tells whether a request comes from a node and which one.
// A user in NodesGroup whose name does not carry a node name is still a node
// (isNode is true) but with an empty name, which grants it nothing. A
// "system:node:" user outside NodesGroup is not a node.
func NodeIdentity(user string, groups []string) (name string, isNode bool) {
	inGroup := false
	for _, g := range groups {
		if g == NodesGroup {
			inGroup = true
			break
		}
	}
	if !inGroup {
		return "", false
	}
	name, ok := strings.CutPrefix(user, NodeUserPrefix)
	if !ok {
		return "", true
	}
	return name, true
}

// Disruptive changes (docs/disruptive-changes.md).
const (
	// DrainAnnotation on a Node says whether the agent drains it for a
	// change: DrainAuto (absent: the agent's --drain default) drains when
	// the change's classification needs it, DrainAlways for every change,
	// DrainNever for none. The rollout controller writes it with each
	// assignment from the rollout's spec.drain; nodes may not write it.
	DrainAnnotation = "nodeguard.dev/drain"
	DrainAuto       = "Auto"
	DrainAlways     = "Always"
	DrainNever      = "Never"

	// CordonedAnnotation on a Node marks a cordon the agent made, in the
	// same write that set spec.unschedulable; the agent removes both
	// together, and never uncordons a Node that lacks the mark (one an
	// administrator cordoned).
	CordonedAnnotation = "nodeguard.dev/cordoned"
)

// Phases of a change, in ConfigStatus.Phase and as the reason of the
// KubeletConfigReady condition while they last.
const (
	PhaseDraining        = "Draining"
	PhaseRestarting      = "Restarting"
	PhaseTrialInProgress = "TrialInProgress"
)

// ValidDrainMode reports whether mode is a value of DrainAnnotation
// (empty counts as DrainAuto).
func ValidDrainMode(mode string) bool {
	switch mode {
	case "", DrainAuto, DrainAlways, DrainNever:
		return true
	}
	return false
}
