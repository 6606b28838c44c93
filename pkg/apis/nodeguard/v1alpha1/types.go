package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// KubeletConfigRollout rolls one eligible kubelet ConfigMap out across the
// Nodes its selector picks: first the canary Nodes, alone, through their
// whole trial; then the rest, never more than maxUnavailable of them
// unavailable at once. The first failed trial, validation failure reported
// by an agent, or admission refusal of an assignment stops it, and with
// onFailure Revert every Node it moved goes back to its previous source.
//
// The rollout writes nothing on Nodes but the nodeguard.dev/config-source
// annotation and its own bookkeeping beside it, always in the same patch:
// nodeguard.dev/rollout names the rollout that last set config-source on
// the Node, and nodeguard.dev/previous-config-source holds config-source as
// it was before (absent when it was absent). A Node whose config-source
// names the target and whose nodeguard.dev/rollout names this rollout was
// moved by it; a revert writes its previous source back and removes both
// annotations, and nodeguard.dev/trial-passed, which the rollout sets on a
// Node it moved once it sees it updated, records the version the Node
// passed: only a Node in its trial on the target can fail the rollout. The
// same patch as the assignment sets nodeguard.dev/drain from spec.drain
// (removed for Auto), and a revert removes it. A controller resumes from
// these and the status alone.
// Deleting a rollout leaves every assignment and annotation as it is.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target.name`,description="The ConfigMap being rolled out"
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selected`,description="Nodes the selector picks"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updated`,description="Nodes running the target as last-known-good"
// +kubebuilder:printcolumn:name="In-Trial",type=integer,JSONPath=`.status.inTrial`,priority=1,description="Nodes assigned the target and not yet through their trial"
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`,description="Nodes that failed the target"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`,description="The reason of the Progressing condition"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KubeletConfigRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec KubeletConfigRolloutSpec `json:"spec"`
	// +optional
	Status KubeletConfigRolloutStatus `json:"status,omitempty"`
}

// KubeletConfigRolloutSpec is what to roll out, where, and how fast.
type KubeletConfigRolloutSpec struct {
	// nodeSelector picks the Nodes to roll out to. It must not be empty:
	// an empty selector would pick every Node in the cluster.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="nodeSelector must not be empty: give matchLabels or matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? size(e.values) > 0 : (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="nodeSelector.matchExpressions: the operator must be In or NotIn with values, or Exists or DoesNotExist without"
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`

	// configMapRef names the eligible ConfigMap to roll out.
	// +required
	ConfigMapRef contract.ConfigMapRef `json:"configMapRef"`

	// canary is how many Nodes take the target first, alone, through their
	// whole trial, before any other Node is assigned it. Canary Nodes also
	// count against maxUnavailable.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	Canary *int32 `json:"canary,omitempty"`

	// maxUnavailable bounds how many selected Nodes may be unavailable at
	// once: not Ready, trying a configuration, or having failed one. An
	// integer (at least 1) or a percentage of the selected Nodes (1% to
	// 100%), rounded down but never below one Node.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// paused stops new assignments; Nodes already trying the target go on.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// onFailure is what happens to the Nodes this rollout moved when it
	// fails: Revert (the default) re-points each to its previous source;
	// Halt leaves them as they are.
	// +optional
	// +kubebuilder:default=Revert
	OnFailure FailurePolicy `json:"onFailure,omitempty"`

	// progressDeadlineSeconds is how long the rollout may go without
	// progress, a selected Node assigned the target or becoming updated,
	// before Progressing turns False with reason ProgressDeadlineExceeded.
	// Nothing is reverted and the rollout goes on as it can; the condition
	// says that it stopped moving and on which Nodes it waits. It should
	// exceed the agents' trial period plus a kubelet restart.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// drain is whether the agents drain a Node before applying the target
	// (cordon, evictions that respect PodDisruptionBudgets, uncordon after
	// the trial): Auto (the default) when the change between the Node's
	// active configuration and the target needs a drain, Always for every
	// change, Never for none. The controller writes it with each
	// assignment as the Node annotation nodeguard.dev/drain: Always and
	// Never as they are; Auto by removing the annotation, so that the
	// agent's own --drain default applies (Auto unless its operator chose
	// otherwise) and no mode an earlier rollout wrote is left behind. A
	// revert removes it too. A Node draining or restarting counts as
	// unavailable, and a drain that times out on a Node in its trial fails
	// the rollout (reason DrainTimedOut).
	// +optional
	// +kubebuilder:default=Auto
	Drain DrainMode `json:"drain,omitempty"`

	// drainOptions are kubectl drain's two switches for pods whose
	// deletion loses something: without them, a pod no controller
	// recreates and a pod with emptyDir data block a Node's drain (the
	// agent reports DrainBlocked, evicts nothing, uncordons the Node and
	// leaves the target unapplied), which fails the rollout as a drain that
	// timed out does. The controller writes them with each assignment as
	// the Node annotations nodeguard.dev/drain-force and
	// nodeguard.dev/drain-delete-emptydir-data ("true"; removed when off),
	// and a revert removes them.
	// +optional
	DrainOptions *contract.DrainOptions `json:"drainOptions,omitempty"`

	// trial are the trial's terms for this rollout's Nodes where they
	// differ from the agents' flags: the period, which signals of the Node
	// and its pods judge it, and whether the target may shrink what a
	// drained Node holds. The controller writes them with each assignment
	// as the Node annotation nodeguard.dev/trial (removed when empty), so
	// pools are judged differently without restarting agents; a revert
	// removes it. It counts a Node it assigned updated no sooner than the
	// period (periodSeconds, else the controller's --trial-period) after
	// the assignment.
	// +optional
	Trial *contract.TrialTerms `json:"trial,omitempty"`
}

// FailurePolicy is what a failed rollout does with the Nodes it moved.
// +kubebuilder:validation:Enum=Revert;Halt
type FailurePolicy string

const (
	// FailureRevert re-points every Node the rollout moved to the target to
	// the source it had before.
	FailureRevert FailurePolicy = "Revert"
	// FailureHalt stops the rollout and leaves every Node as it is.
	FailureHalt FailurePolicy = "Halt"
)

// DrainMode is whether the agents drain a Node for the target; its
// values are those of the contract's nodeguard.dev/drain annotation
// (contract.DrainAuto, DrainAlways, DrainNever).
// +kubebuilder:validation:Enum=Auto;Always;Never
type DrainMode string

const (
	// DrainAuto drains a Node when the change needs it, by the field
	// classification the agent applies (docs/reference.md, "Disruptive changes
	// and the trial").
	DrainAuto DrainMode = contract.DrainAuto
	// DrainAlways drains a Node for every change.
	DrainAlways DrainMode = contract.DrainAlways
	// DrainNever never drains a Node, whatever the change needs.
	DrainNever DrainMode = contract.DrainNever
)

// KubeletConfigRolloutStatus is what the controller last saw and decided.
// Everything in it can be recomputed from the Nodes except the failure:
// once a rollout has failed for a target, it stays failed for that target
// (see the Failed condition) even after its Nodes are reverted.
type KubeletConfigRolloutStatus struct {
	// observedGeneration is the generation of the spec this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// target is the version of the ConfigMap being rolled out. A new
	// resourceVersion or a new configMapRef starts the rollout over from
	// the canary. uid and resourceVersion are empty while the ConfigMap
	// does not exist.
	// +optional
	Target *contract.ConfigMapVersion `json:"target,omitempty"`

	// selected is how many Nodes the selector picks.
	// +optional
	Selected int32 `json:"selected"`
	// updated is how many selected Nodes report the target active and
	// last-known-good.
	// +optional
	Updated int32 `json:"updated"`
	// inTrial is how many selected Nodes are assigned the target and not
	// yet updated.
	// +optional
	InTrial int32 `json:"inTrial"`
	// failed is how many selected Nodes report that the target failed
	// validation or its trial, whether or not that failed the rollout (see
	// the Failed condition).
	// +optional
	Failed int32 `json:"failed"`
	// skippedNodes are the selected Nodes admission refused the target for
	// their own reported state (their kubelet version, a policy on their
	// labels), with the refusal: the rollout leaves them as they are and
	// goes on with the others. The list is for status.target and the
	// rollout's generation: a new target or an edit of the spec tries them
	// again.
	// +optional
	// +listType=map
	// +listMapKey=name
	SkippedNodes []SkippedNode `json:"skippedNodes,omitempty"`

	// unfitNodes are the selected Nodes not yet on the target that it
	// would leave unable to hold the pods they run: their allocatable as
	// the target's reservations and pod limit leave their capacity
	// (status.capacity, each Node's word about itself) is short of what
	// those pods request. Reported before anything moves; such a Node's
	// own trial fails after its drain unless spec.trial.allowShrink. For
	// status.target.
	// +optional
	// +listType=map
	// +listMapKey=name
	UnfitNodes []UnfitNode `json:"unfitNodes,omitempty"`

	// lastProgressTime is when the rollout last made progress on its
	// target: it started on it, a selected Node was assigned it, or one
	// became updated. spec.progressDeadlineSeconds counts from it.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`

	// conditions are Progressing, Complete, Failed and Paused. The reason
	// of Progressing is the rollout's state at a glance.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// SkippedNode is a Node a rollout leaves alone because admission refused
// it the target for the Node's own reported state.
type SkippedNode struct {
	// name of the Node.
	// +required
	Name string `json:"name"`
	// message is admission's refusal, which names the rule and why.
	// +optional
	Message string `json:"message,omitempty"`
}

// UnfitNode is a Node the target would leave unable to hold its pods.
type UnfitNode struct {
	// name of the Node.
	// +required
	Name string `json:"name"`
	// message names each resource short and by how much.
	// +optional
	Message string `json:"message,omitempty"`
}

// KubeletConfigRolloutList is a list of KubeletConfigRollouts.
//
// +kubebuilder:object:root=true
type KubeletConfigRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeletConfigRollout `json:"items"`
}
