// Package program is the start-up the three programs (cmd/webhook,
// cmd/agent, cmd/rollout-controller) share: the command line into Options
// with klog's flags beside, Validate() []error, a context that ends on
// SIGTERM or SIGINT and carries the program's logger, the exit codes, the
// apiserver configuration from --kubeconfig or in-cluster, the
// Prometheus registry with the Go and process collectors, and the
// apiserver client's own metrics (RegisterClientMetrics). Each
// cmd/<program> holds only its wiring: Options, then the constructors of
// its packages in run.
//
// It is light on purpose: cmd/agent links it, and the agent's binary stays
// free of the clientsets and the apiserver's packages
// (pkg/nodeagent's TestAgentBinaryStaysSmall).
package program
