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
