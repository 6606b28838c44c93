// Package app runs the KubeletConfigRollout controller as a process: the
// clients, the Event recorder, the metrics and health server, and leader
// election over a Lease, so that of several replicas exactly one decides
// at a time. cmd/rollout-controller only turns flags into a Config.
//
// A replica that is not the leader serves /healthz, /livez, /readyz and
// /metrics and waits; it starts its informers only once it leads, so a
// standby costs the apiserver nothing. A leader that loses its Lease
// exits, as kube-controller-manager does, rather than run on beside a new
// leader: its in-memory expectations would no longer be the whole truth,
// and the restart is cheap.
package app
