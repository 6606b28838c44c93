// Package hardening holds the rules that keep a shared kubelet
// configuration from opening its nodes up: the dangerous fields (the
// kubelet recommendations of the CIS Kubernetes Benchmark, section 4.2, and
// settings of the same kind, among them every field that makes the kubelet
// execute or load from a path) and the NodeguardPolicy's
// forbiddenDynamicFields. It is their one implementation, for both sides:
//
//   - the admission webhook hands what Find and Risky report to the shipped
//     Rego policy policies/dangerous_fields.rego, as
//     input.nodeguard.dangerousFields and input.nodeguard.riskyFields
//     (pkg/policy renders them from the decoded configuration); the policy
//     turns them into denials and warnings, and honours the ConfigMap's
//     nodeguard.dev/allow-dangerous-fields annotation. The config-content rule reads
//     Forbidden for forbiddenDynamicFields;
//   - the node agent (pkg/nodeagent/reconciler, validation.go) calls Judge and Forbidden
//     on each configuration before it writes anything, with the same
//     annotation read from the ConfigMap, so that a configuration that
//     reached the node without admission (written before nodeguard was
//     installed or its policy changed, kept in a namespace the webhook
//     exempts, by an exempt user) is refused there too.
//
// The runtime socket allow-list is deployment data, not a rule: the webhook
// reads data.nodeguard.config.container_runtime_endpoints in Rego (the
// shipped policy's own endpoint rules), the agent its
// --container-runtime-endpoints; both default to DefaultRuntimeEndpoints.
// Find judges the endpoints only when given a list.
//
// A configuration is judged on what it sets: the decoded form cannot tell
// an unset non-pointer field from its zero value, so those are not judged
// (streamingConnectionIdleTimeout 0, rotateCertificates false,
// protectKernelDefaults false). Fields judged on change (staticPodPath and
// the other path fields) compare against the previous configuration; the
// agent, which has none, judges every configuration as a new one.
package hardening
