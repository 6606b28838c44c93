// Package policy evaluates the Rego policies policy authors write for
// nodeguard. policies/README.md is their guide (packages, input documents,
// built-ins, failure policies); this is the Go side.
//
// An Engine compiles a policy set once (the policies shipped in the binary,
// or a directory), prepares one query per package, and evaluates it for
// every review:
//
//	engine, err := policy.New(ctx, policy.Options{Dir: dir, Graph: g, Metrics: m})
//	go engine.Run(ctx)  // reload when the directory changes
//	// ReadyChecks: engine.HealthChecker()
//
//	in := &policy.AdmissionInput{Request: review.Request, KubeletConfig: cfg, OldKubeletConfig: oldCfg}
//	in.Node, in.KubeletVersion, in.NodeLabels = policy.NodeOf(user, groups, g)
//	res, err := engine.EvalAdmission(ctx, in)
//
// The webhook's reviews (pkg/server) do not call the engine themselves:
// AdmissionPolicies and AuthzPolicies (verdict.go) evaluate for one review,
// apply the failure policy and return a verdict (denied or not, the rule
// or reason, warnings, the evaluation error), which the review turns into
// its answer. An authorization policy's allow counts only where the review
// scopes it (a node's named ConfigMap read the built-in rules found no
// path for, after sync).
//
// Queries: data.nodeguard.admission.deny and .warn (sets of messages), and
// data.nodeguard.authz.deny (a set) and .allow (a boolean). A missing
// package or rule means "nothing to say". A message is a string or an
// object {"msg": ..., "rule": ..., "scope": "node"}; Violation carries the
// package, the rule, the message and whether the denial is node-scoped
// (about the target Node's own state, which a rollout skips the Node for).
//
// Loading: a set that does not read, parse, compile, or pass nodeguard's
// shape checks never replaces the set in service. Its problems (file, line,
// message) are logged through klog, counted in
// nodeguard_policy_load_errors_total and nodeguard_policy_last_load_success,
// and returned by LoadError; Ready fails only until a first set has loaded.
//
// Evaluation: each call is bounded by Options.Timeout and the caller's
// deadline. An error (timeout, conflict, malformed result, no set yet) is an
// *EvalError, which a FailurePolicy maps: admission fails closed,
// authorization has no opinion.
//
// Inputs: the review as encoding/json writes it (the form the apiserver
// sends), plus what the graph knows of the requesting node, read back the
// way OPA reads JSON (input.go). OPA's rule index does the pruning: a
// policy states its conditions on input (input.nodeguard.nodeLabels included)
// and the index rules it out for the reviews it cannot match.
//
// Built-ins: nodeguard.reachable(node, "configmap", namespace, name) and
// nodeguard.node(name) read the graph through GraphReader. Capabilities
// returns what policies compile against; policies/capabilities.json is its
// JSON, for `opa test --capabilities` (go generate rewrites it). Package
// policytest runs Rego tests from Go the same way.
//
// Files: engine.go (loading, readiness), load.go (reading, checks),
// eval.go (queries, results, failure policies), input.go (input
// documents), verdict.go (what the reviews ask of the policies),
// builtins.go, confignamespaces.go, capabilities.go, metrics.go.
package policy
