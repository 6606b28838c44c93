// Command rollout-controller runs the KubeletConfigRollout controller: it
// rolls eligible kubelet ConfigMaps out across pools of Nodes, a few at a
// time, by writing their nodeguard.dev/config-source annotation, and stops
// on the first failure. The logic is in pkg/rollout; this
// command wires flags to it (run.go: clients, metrics, health, Lease).
package main

import "github.com/nodeguard/nodeguard/pkg/program"

const usage = `nodeguard rollout-controller: pool rollouts of kubelet configurations.

It watches KubeletConfigRollouts (nodeguard.dev/v1alpha1), the Nodes their
selectors pick and the eligible ConfigMaps they name. For each rollout it
assigns the ConfigMap to a canary Node first, then to the rest within
maxUnavailable, through the nodeguard.dev/config-source annotation; the node
agents apply and try it and report back. The first failure stops the rollout
and, with onFailure Revert, re-points the Nodes it moved. Several replicas may
run: one leads through a Lease, the others wait. See docs/rollouts.md.
`

func main() { program.Main("rollout-controller", usage, NewOptions(), run) }
