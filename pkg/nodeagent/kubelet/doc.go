// Package kubelet is everything the agent does to the kubelet: render the
// configuration file from a checkpoint and the node's local settings, write
// it atomically, restart the kubelet, and probe its /healthz.
//
// # Restarting
//
// A Restarter restarts the kubelet and says whether that worked.
// SystemdRestarter asks systemd over the system bus (D-Bus) to restart the
// kubelet's unit and waits for the job's result, so that a unit that fails
// to start is a failed restart rather than a success the trial has to
// discover. CommandRestarter runs an operator-given command, for hosts whose
// kubelet is not a systemd unit (and for tests that stand in for one); it
// knows only the command's exit status.
//
// # Where the configuration goes
//
// In ModeConfig the agent owns the kubelet's --config file. The node's own
// configuration lives in a separate local file (--local-config-file): it is
// written verbatim when no ConfigMap is assigned, and it supplies the
// node-local fields when one is.
//
// In ModeDropIn the agent owns one drop-in file in the kubelet's --config-dir
// (it must end in ".conf", or the kubelet ignores it). The kubelet merges it
// over its --config file, which stays the node's own. The local
// configuration is the absence of the drop-in.
//
// # Node-local fields
//
// Some fields describe one machine and must never come from a ConfigMap
// shared by many: a shared value would be wrong on every node but one, or
// would break the agent's own health probe. They are (DefaultLocalFields):
//
//	providerID                 the node's identity at its cloud provider
//	tlsCertFile                the kubelet's serving certificate ...
//	tlsPrivateKeyFile          ... and key, issued per node
//	staticPodPath              where this node keeps its static pods
//	containerRuntimeEndpoint   the runtime socket on this machine
//	imageServiceEndpoint       the image service socket on this machine
//	resolvConf                 the resolver file this OS uses
//	healthzBindAddress         where the agent probes the kubelet ...
//	healthzPort                ... which a shared config must not move
//	authentication             who may call the kubelet's API (the client CA
//	                           file on this machine the apiserver's
//	                           certificate is checked against) ...
//	authorization              ... and how they are authorized: without
//	                           them the kubelet falls back to its defaults
//	                           and refuses the apiserver (logs, exec)
//
// In ModeConfig each is copied from the local file over the ConfigMap's
// value (or removed when the local file does not set it); in ModeDropIn each
// is removed from the drop-in, so the --config file's value stands. Either
// way the ConfigMap cannot set them. The shipped policy forbids
// authentication and authorization in ConfigMaps (forbiddenDynamicFields),
// so the node's own values must stand. The list can be changed with
// --local-fields; only top-level fields can be named.
//
// The transform works on the configuration as a map of fields, not on the
// decoded Go type, so that fields the author left out stay left out (the
// kubelet then applies its own defaults) rather than being written as zero
// values.
package kubelet
