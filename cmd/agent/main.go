// Command agent is nodeguard's node agent: it runs beside the kubelet with
// the kubelet's credentials, applies the KubeletConfiguration assigned to its
// Node through the nodeguard.dev/config-source annotation, keeps it on trial,
// rolls back what makes the kubelet unhealthy, and reports on the Node. All
// logic is in pkg/nodeagent; this file only wires flags.
package main

import (
	"context"

	"github.com/nodeguard/nodeguard/pkg/nodeagent"
	"github.com/nodeguard/nodeguard/pkg/program"
)

const usage = `nodeguard agent: Dynamic Kubelet Config for this node.

It watches this node's Node object for the nodeguard.dev/config-source
annotation, downloads the assigned ConfigMap, checkpoints it under --state-dir,
validates it (as the admission webhook does, feature gates against this
kubelet's version), writes the kubelet's configuration file, restarts the
kubelet (through systemd over D-Bus, or with --kubelet-restart-command where
the kubelet is not a systemd unit), and keeps the new configuration on trial.
A trial judges the kubelet's /healthz and, against what was seen just before
the restart, the Node's Ready and pressure conditions, the pods bound to it
that the kubelet rejects or evicts, and its allocatable (--trial-* flags).
One that fails is rolled back to the last known good one (or the local
configuration). Status is reported on the Node: annotation
nodeguard.dev/config-status and condition KubeletConfigReady. See
docs/agent.md.
`

func main() { program.Main("agent", usage, NewOptions(), run) }

func run(ctx context.Context, opts *Options) error {
	return nodeagent.Run(ctx, opts.Config())
}
