// Package nodeagent is nodeguard's node agent: it brings back Dynamic
// Kubelet Config on top of an annotation on the Node (see docs/reference.md).
// Run wires the pieces, each in its own package:
//
//	kubeclient   the kubelet's kubeconfig and certificate, waited for and reloaded
//	source       named watches on the Node and on its assigned ConfigMap
//	reconciler   the state machine: checkpoint, validate (pkg/kubeletconfig's
//	             checks, the same as admission's), apply, trial, roll back
//	checkpoint   the crash-safe state directory
//	durable      atomic, fsynced writes and removals of files
//	kubelet      the config file, node-local fields, restart command, /healthz probe
//	trial        the trial's verdict from health probes
//	bootclock    time since boot and the boot ID
//	status       the Node annotation, condition and Events
//	metrics      Prometheus metrics
//	httpserver   the agent's own /healthz, /readyz and /metrics
//
// One worker runs the reconciler, fed by a client-go work queue with a
// single key: every watch event, every retry and every trial probe adds
// that key, so bursts coalesce into one pass over the latest state, and no
// two passes ever run at once. The worker starts before the apiserver is
// reachable, from the state directory alone; the watches join once the
// kubelet's credentials exist. Status and Events are written by their own
// goroutine, so a slow or absent apiserver never holds up a trial.
//
// This package never imports the webhook's packages (graph, authz,
// admission, server, policy).
package nodeagent
