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

// The terms an assignment is applied by, beside DrainAnnotation
// (docs/reference.md, "Disruptive changes and the trial"): what the drain
// may delete, and how the trial judges. A rollout writes them with each
// assignment from its spec (drainOptions, trial) and removes them when its
// spec leaves them out; an administrator may write them on a Node for an
// assignment of their own. Nodes may not write them (the config-source rule). Absent, the
// agent's flags are the terms.
const (
	// DrainForceAnnotation "true" lets the drain evict pods no controller
	// recreates (a pod without a controller owner), as `kubectl drain
	// --force` does; otherwise such a pod blocks the drain.
	DrainForceAnnotation = "nodeguard.dev/drain-force"
	// DrainDeleteEmptyDirDataAnnotation "true" lets the drain evict pods
	// with emptyDir volumes, whose data goes with them, as `kubectl drain
	// --delete-emptydir-data` does; otherwise such a pod blocks the drain.
	DrainDeleteEmptyDirDataAnnotation = "nodeguard.dev/drain-delete-emptydir-data"
	// TrialAnnotation holds the trial's terms for the assignment, a
	// TrialTerms as JSON (`{"periodSeconds":600,"signals":{"pressure":false}}`).
	TrialAnnotation = "nodeguard.dev/trial"
)

// The rollout's bookkeeping on Nodes; see v1alpha1.KubeletConfigRollout.
const (
	// RolloutAnnotation names the KubeletConfigRollout that last set the
	// Node's nodeguard.dev/config-source.
	RolloutAnnotation = "nodeguard.dev/rollout"
	// PreviousConfigSourceAnnotation holds the Node's
	// nodeguard.dev/config-source as it was before that rollout set it,
	// possibly empty (the local configuration); it is absent when the
	// annotation was absent, so that a revert removes it again and a legacy
	// spec.configSource is read as before.
	PreviousConfigSourceAnnotation = "nodeguard.dev/previous-config-source"
	// TrialPassedAnnotation is set by the rollout that moved the Node,
	// once the Node reports its target updated, to the target's version as
	// "<namespace>/<name>@<resourceVersion>". Only a Node this rollout
	// moved to the target and that has not passed its trial on that
	// version can fail the pool: a failure reported afterwards is the
	// Node's own, shown but never reverting the others.
	TrialPassedAnnotation = "nodeguard.dev/trial-passed"
	// TrialEndsAnnotation is set by a rollout with each assignment, to the
	// time (RFC 3339) its trial period ends counted from the assignment
	// (spec.trial.periodSeconds, else the controller's --trial-period): the
	// rollout counts the Node updated no sooner, whatever its agent
	// reports, and a restarted controller, or kubectl nodeguard rollout
	// status, reads the same time from the Node.
	TrialEndsAnnotation = "nodeguard.dev/trial-ends"
)

// BookkeepingAnnotations are the annotations only the rollout controller
// writes on Nodes (beside the assignment); no node may add, change or
// remove them, and a revert removes them all. DrainAnnotation, the
// drain's switches and TrialAnnotation are among them: they carry
// spec.drain, spec.drainOptions and spec.trial of the rollout that assigned
// the Node (or an administrator's word for an assignment of their own), on
// how the Node's workloads are treated and its trial judged, which the
// node's own credentials (the agent's) must not rewrite.
var BookkeepingAnnotations = []string{RolloutAnnotation, PreviousConfigSourceAnnotation, TrialPassedAnnotation, DrainAnnotation,
	TrialEndsAnnotation, TrialAnnotation, DrainForceAnnotation, DrainDeleteEmptyDirDataAnnotation}

// AllowDangerousFieldsAnnotation on an eligible ConfigMap names the
// dangerous fields its configuration may set anyway ("tlsCipherSuites",
// several separated by commas), or says "true" for every field; each
// allowed field is then a warning (pkg/kubeletconfig/hardening). It never
// lifts the fields that may not change dynamically.
const AllowDangerousFieldsAnnotation = "nodeguard.dev/allow-dangerous-fields"
