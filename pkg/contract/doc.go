// Package contract holds the user-facing names of nodeguard, as fixed by
// docs/reference.md: every nodeguard.dev/ name (names.go: the eligibility
// label, the Node annotations that carry the assignment and the status, the
// drain's and the trial's terms, the rollout's bookkeeping; a test keeps
// any other package from spelling one), the ConfigMap data key, the Node
// condition and its reasons, the reasons of the Events the agent posts on its Node,
// the rules that tell a node's identity from a request's user, which Node
// labels a node may write itself (the node-restriction rule: NodeMayWriteLabel, which both the
// webhook and the rollout selector check read), the status cause that
// marks a refusal concerning a Node's own reported state
// (IsNodeStateRefusal), the wording of a refusal (Rule.Refusal), and the
// places a pod names a ConfigMap (VisitPodConfigMaps: what the graph counts,
// the pod rules refuse and `kubectl nodeguard explain` shows).
//
// Everything that reads or writes those names (the webhook, the agent, the
// kubectl plugin, the rollout controller) goes through this package, so a
// name can only drift here. It depends on nothing but the core API types,
// apimachinery's meta types and API errors, and the kubelet's list of its
// own labels (k8s.io/kubelet/pkg/apis), so the API types
// (pkg/apis/nodeguard/v1alpha1) import it without a cycle.
package contract
