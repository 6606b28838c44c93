// Package contract holds the user-facing names of nodeguard, as fixed by
// CONTRACT.md: the eligibility label, the ConfigMap data key, the Node
// annotations that carry the assignment and the status, the Node condition,
// and the rules that tell a node's identity from a request's user.
//
// Everything that reads or writes those names (the webhook, the agent, the
// kubectl plugin) goes through this package, so a name can only drift here.
// It depends on nothing but the core API types.
package contract
