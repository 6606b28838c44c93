// Package statelock keeps one agent per node: an agent holds an exclusive
// lock on a file in its state directory for as long as it runs. Two agents
// on one node (a DaemonSet pod force-deleted while its container still
// runs, a surge during a rollout, a second installation) would otherwise
// both write the kubelet's configuration and restart it, and each would
// remove the other's in-flight temporary files at start-up as a crash's
// leftovers.
//
// The lock is flock(2) on an open file: the kernel drops it when the
// holder exits, however it exits, so a killed agent never leaves a stale
// lock behind, and the file's presence means nothing.
package statelock
