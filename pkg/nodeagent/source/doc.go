// Package source watches what the agent needs from the apiserver, and
// nothing more: its own Node, through a named watch (fieldSelector
// metadata.name=NODE), the ConfigMap assigned to it, through a named watch
// in its namespace, and, when the trial judges workloads, the pods bound to
// it (fieldSelector spec.nodeName=NODE, across namespaces, cached slimmed to
// what the trial reads). Those are the only list/watch requests the node
// authorizer and nodeguard's webhook allow a node.
//
// The ConfigMap watch follows the assignment: when the Node names another
// ConfigMap, or none, the old watch is cancelled before the new one starts,
// so rapid reassignments leave no watch behind. Every event only calls the
// change callback (which adds the agent's single work-queue key); the worker
// then reads the latest state through Observe, so bursts coalesce into one
// pass. Pod events call nothing: during a trial a pass comes at least every
// probe period and reads the pods then.
package source
