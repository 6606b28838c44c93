// Package cli is the kubectl plugin, kubectl-nodeguard: the commands an
// operator uses to see and change which kubelet configuration each node runs.
//
//	status   [NODE...] [-l SELECTOR] [-o wide|json|yaml]
//	create   NAME --from-file=FILE [--dry-run=none|client|server] [-o name]
//	assign   CONFIGMAP (NODE... | -l SELECTOR) [--dry-run=none|client|server]
//	unassign (NODE... | -l SELECTOR) [--dry-run=none|client|server]
//	explain  NODE CONFIGMAP
//	rollout  status NAME [-w [--timeout D]] [-o json|yaml]
//	rollout  pause|resume NAME
//	rollout  undo NAME [--dry-run=none|client|server] [--timeout D]
//
// status reads what docs/reference.md has the agent write (the
// nodeguard.dev/config-status annotation and the KubeletConfigReady
// condition) and shows it next to the assignment.
//
// create writes a kubelet configuration as an eligible, immutable ConfigMap
// named NAME-HASH after its content (as kustomize's configMapGenerator names
// them), once it decodes strictly and validates, so that every revision is
// a ConfigMap of its own and the webhook's warning about mutable ConfigMaps
// never applies.
//
// assign runs, before it writes, the checks the admission webhook makes for
// an assignment (the feature-gates rule, and the config-content rule's strict decoding), with the webhook's
// own judgement and messages (kubeletconfig.JudgeAssignment), plus the ones the agent makes before it applies a configuration
// (the ConfigMap exists, is eligible and validates). A refusal by those
// checks stops every write, so a selector never half-applies because of a
// problem known beforehand; the webhook still judges each patch, and with
// --dry-run=server it judges them without anything being written. Writes
// are JSON merge patches of the assignment annotation alone.
//
// explain computes the graph path from a ConfigMap to a node from the API
// (assignment and eligibility, pods bound to the node that reference it,
// found as the graph finds them with contract.VisitPodConfigMaps) and
// asks the apiserver's real authorizer chain through a SubjectAccessReview,
// so an operator sees both what should be and what is.
//
// The rollout commands read KubeletConfigRollouts through a typed REST
// client of the CRD, as the controller does, and judge their Nodes with pkg/rollout, the controller's own decision
// function, so that what status shows is what the controller decides;
// undo writes the controller's own revert (rollout.Undo) on each Node.
//
// Run is the whole program; cmd/kubectl-nodeguard only calls it.
package cli
