// Package policies holds nodeguard's shipped Rego policies and their tests,
// and embeds them so that pkg/policy can serve them when no policy directory
// is given. README.md in this directory is the guide for policy authors.
package policies
