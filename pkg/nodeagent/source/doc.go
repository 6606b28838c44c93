// Package source watches what the agent needs from the apiserver, and
// nothing more: its own Node, through a named watch (fieldSelector
// metadata.name=NODE), the ConfigMap assigned to it, through a named watch
// in its namespace, and, when the trial judges workloads, a list of the
// pods bound to it (fieldSelector spec.nodeName=NODE, across namespaces)
// that Observe offers and the trial calls only around a restart and once a
// probe period during a trial. Those are the only list/watch requests the
// node authorizer and nodeguard's webhook allow a node.
//
// The ConfigMap watch follows the assignment: when the Node names another
// ConfigMap, or none, the old watch is cancelled before the new one starts,
// so rapid reassignments leave no watch behind. Every event only calls the
// change callback (which adds the agent's single work-queue key); the worker
// then reads the latest state through Observe, so bursts coalesce into one
// pass.
package source
