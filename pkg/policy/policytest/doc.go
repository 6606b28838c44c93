// Package policytest runs the Rego tests of a policy directory from Go, the
// way `opa test --capabilities policies/capabilities.json DIR` runs them,
// and checks that policy files are formatted as `opa fmt` formats them.
// `make test` uses it for the shipped policies, so no OPA CLI is needed.
//
// nodeguard's built-ins (nodeguard.reachable, nodeguard.node) are declared
// but not implemented here, as with the stock CLI: a test must mock them
// with `with nodeguard.node as ...`, and a test that forgets fails with
// "unsupported built-in" in both places alike.
//
// It lives apart from package policy because OPA's tester pulls the
// standard testing package into whatever imports it.
package policytest
