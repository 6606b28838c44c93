// Package cluster generates the synthetic cluster that nodeguard's
// benchmarks feed to its graph and to the in-tree Node authorizer's graph:
// Nodes that each carry a config-source assignment, bound Pods that each
// reference two ConfigMaps of their own, eligible ConfigMaps, and
// SubjectAccessReview requests whose right answer is known.
//
// Everything is derived from indices and a seed, so two runs (and the two
// graphs within one run) see exactly the same objects and requests.
package cluster
