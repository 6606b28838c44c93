// Package validation judges a configuration before the agent applies it,
// with pkg/kubeletconfig: the same strict decoding, validation and
// feature-gate checks as the admission webhook, so a configuration admission
// would refuse is never applied, and the status quotes the same message.
//
// The feature gates are checked against the node's own kubelet version,
// which the agent reads from its Node (status.nodeInfo.kubeletVersion) unless
// --kubelet-version overrides it.
package validation
