// Package validation judges a configuration before the agent applies it,
// with pkg/kubeletconfig: the same strict decoding, validation and
// feature-gate checks as the admission webhook, so a configuration admission
// would refuse is never applied, and the status quotes the same message.
//
// It holds the configuration to the same hardening rules as the webhook
// too, with their one implementation, pkg/kubeletconfig/hardening: the
// NodeguardPolicy's forbiddenDynamicFields (Rules.ForbiddenFields, from the
// agent's --policy-config) and the dangerous fields of the shipped
// dangerous_fields policy, honouring the allowance annotation of the
// ConfigMap the configuration came from (Allowances, fed from every
// ConfigMap the agent reads). A configuration that reached the node without
// passing admission (written before nodeguard was installed or its policy
// changed, by a user the policy exempts, in a namespace the webhook does
// not judge) is refused here, before anything is written, as a validation
// failure.
//
// Two differences from the webhook, both because the agent sees one
// configuration and not an edit of another: it judges every configuration
// as a new one (a path field an edit left unchanged, which the webhook lets
// through, is refused here unless allowed), and it leaves out the node-local
// fields (--local-fields), which it never takes from a ConfigMap, so that a
// value there is never applied and never judged.
//
// The feature gates are checked against the node's own kubelet version,
// which the agent reads from its Node (status.nodeInfo.kubeletVersion) unless
// --kubelet-version overrides it.
package validation
