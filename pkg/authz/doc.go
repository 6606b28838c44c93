// Package authz decides SubjectAccessReviews for the /authorize endpoint, as
// the authorization rules of docs/reference.md say: a node may read (get, and list or
// watch by name) a ConfigMap only when the graph has a path from it to the
// node; a node may get nodes/configz of its own Node, which its kubelet
// asks when the node's agent reads the configuration that kubelet runs, and
// of no other; and a node whose kubelet is older than the configured minimum
// is denied everything but reading and updating its own Node.
//
// A refusal is a value (a Decision and a Reason), never an error.
// Authorizer.Authorize is the pure decision; pkg/server's /authorize review
// decodes the SubjectAccessReview, adds the Rego policies and answers. The
// graph is pkg/graph, which this package reads through the small
// GraphReader interface.
package authz
