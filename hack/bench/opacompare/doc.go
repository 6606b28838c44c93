// Package opacompare measures nodeguard's HTTPS endpoints with the shipped
// Rego policies on beside a stock OPA server (`opa run --server`, built
// from the Go module proxy at the OPA version nodeguard links) evaluating
// the same policies, on loopback, with the same load generator, protocol
// and concurrency (test/loadtest).
//
// What "the same rules" means here:
//
//   - OPA gets the shipped policy files unchanged except for one textual
//     rewrite: calls of nodeguard's graph built-ins, nodeguard.node(...) and
//     nodeguard.reachable(...), become calls of data.nodeguard_shim.node and
//     .reachable, two one-line Rego functions that look the answer up in a
//     data document holding the same facts (every node as nodeguard.node
//     renders it, and every node's reachable ConfigMaps). A stock OPA has no
//     way to call into nodeguard's graph.
//   - OPA is asked exactly what nodeguard's engine asks, in one query: the
//     deny and warn sets of nodeguard.admission, or the deny set and allow
//     (default false) of nodeguard.authz, with the input document nodeguard
//     builds for the same review (policy.AdmissionInput / AuthzInput).
//   - OPA evaluates only the policies; nodeguard answers the
//     AdmissionReview or SubjectAccessReview itself: it decodes it, runs the
//     built-in rules, builds the input, evaluates the policies and encodes
//     the answer. The comparison therefore favours OPA, which never sees a
//     Kubernetes review nor runs the built-in rules; an OPA deployment would
//     need an adapter in front doing that work.
//
// Before any timing, every distinct request is decided by both, and the
// policy verdicts (deny and warn messages) must agree.
package opacompare
