package v1alpha1

// Defaults the apiserver applies (see the markers on the spec); a client
// that reads a rollout not defaulted by an apiserver applies them too.
const (
	DefaultCanary         = 1
	DefaultMaxUnavailable = 1
	DefaultOnFailure      = FailureRevert
	// DefaultProgressDeadlineSeconds is ten minutes, as a Deployment's: a
	// Node's trial (the agents' --trial-period, five minutes by default)
	// and its kubelet's restart fit in it.
	DefaultProgressDeadlineSeconds = 600
	DefaultDrain                   = DrainAuto
)

// Condition types of a KubeletConfigRollout. The rollout always carries
// all four; the reason of Progressing says where it stands.
const (
	// ConditionProgressing is True while the rollout assigns the target or
	// waits on Nodes trying it, False when it has stopped; its reason is
	// the rollout's state (one of the Reason* constants below).
	ConditionProgressing = "Progressing"
	// ConditionComplete is True when every selected Node is updated.
	ConditionComplete = "Complete"
	// ConditionFailed is True once the target failed on a Node, and stays
	// True for that target; its message names the Node and the reason.
	ConditionFailed = "Failed"
	// ConditionPaused is True while spec.paused is.
	ConditionPaused = "Paused"
)

// Reasons of the Progressing condition, which double as the rollout's state
// (the State column of kubectl get). Complete=False carries the same reason.
const (
	// ReasonCanary: the canary Nodes are taking the target (True).
	ReasonCanary = "Canary"
	// ReasonRollingOut: the canary is through; the rest are taking the
	// target within maxUnavailable (True).
	ReasonRollingOut = "RollingOut"
	// ReasonComplete: every selected Node is updated (False: nothing left
	// to do until a Node joins or the target changes).
	ReasonComplete = "Complete"
	// ReasonPaused: spec.paused holds back new assignments (False).
	ReasonPaused = "Paused"
	// ReasonReverting: the rollout failed and is re-pointing the Nodes it
	// moved to their previous sources (False).
	ReasonReverting = "Reverting"
	// ReasonReverted: the rollout failed and every Node it moved is back on
	// its previous source (False).
	ReasonReverted = "Reverted"
	// ReasonHalted: the rollout failed with onFailure Halt (False).
	ReasonHalted = "Halted"
	// ReasonTargetNotFound: the ConfigMap does not exist (False).
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonTargetNotEligible: the ConfigMap exists but lacks the label
	// nodeguard.dev/kubelet-config=true, so no Node may be assigned it
	// (False).
	ReasonTargetNotEligible = "TargetNotEligible"
	// ReasonNodesSkipped: every Node left to update was skipped, refused
	// the target by admission for its own reported state (False).
	ReasonNodesSkipped = "NodesSkipped"
	// ReasonNodesDegraded: every Node the rollout may move took the
	// target, and some later degraded: the kubelet no longer runs it as
	// applied (ConfigDrifted), or the Node reports it failed outside a
	// trial of this rollout's (False). Nothing is left to assign and
	// nothing is reverted: each such Node says why, for an operator to act.
	ReasonNodesDegraded = "NodesDegraded"
	// ReasonProgressDeadlineExceeded: no selected Node was assigned the
	// target or became updated for spec.progressDeadlineSeconds (False).
	// Nothing is reverted; the rollout moves on when it can.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonNodesInConflict: every Node left to update is also selected by
	// another rollout, so both leave it alone (False).
	ReasonNodesInConflict = "NodesInConflict"
	// ReasonNoNodesSelected: the selector picks no Node (False).
	ReasonNoNodesSelected = "NoNodesSelected"
)

// Reasons of the other conditions.
const (
	// ReasonAllNodesUpdated: Complete=True.
	ReasonAllNodesUpdated = "AllNodesUpdated"

	// ReasonTrialFailed: Failed=True, a Node's agent rolled the target back
	// after it failed its trial.
	ReasonTrialFailed = "TrialFailed"
	// ReasonValidationFailed: Failed=True, a Node's agent refused the
	// target without applying it.
	ReasonValidationFailed = "ValidationFailed"
	// ReasonAssignmentRefused: Failed=True, the apiserver's admission
	// refused assigning the target to a Node.
	ReasonAssignmentRefused = "AssignmentRefused"
	// ReasonDrainTimedOut: Failed=True, a Node's agent could not drain it
	// for the target within its drain timeout (pods a PodDisruptionBudget
	// protects, or pods that would not terminate), uncordoned it and did
	// not apply the target; the message names the Node and those pods.
	ReasonDrainTimedOut = "DrainTimedOut"
	// ReasonDrainBlocked: Failed=True, a Node's drain for the target would
	// have deleted pods kubectl drain protects (no controller recreates
	// them, or they hold emptyDir data) and spec.drainOptions did not allow
	// it; the agent evicted nothing, uncordoned the Node and did not apply
	// the target. The message names the Node and those pods.
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonNoFailure: Failed=False.
	ReasonNoFailure = "NoFailure"

	// ReasonSpecPaused: Paused=True.
	ReasonSpecPaused = "SpecPaused"
	// ReasonNotPaused: Paused=False.
	ReasonNotPaused = "NotPaused"
)
