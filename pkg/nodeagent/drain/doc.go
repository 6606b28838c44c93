// Package drain is how the node agent empties its own Node for a change the
// kubelet cannot take with a restart alone (docs/disruptive-changes.md):
// cordon, evict through the Eviction API, and remove the cordon afterwards.
//
// It runs with the kubelet's credentials. The in-tree NodeRestriction
// plugin lets a node evict only the pods bound to itself, and change
// spec.unschedulable of its own Node, which is all a drain of that one Node
// needs: no component holds cluster-wide eviction rights for it, and a
// compromised agent can disrupt no Node but its own.
//
// A drain is taken one step at a time (Drainer.Evict sends the evictions
// that can be sent now and says what is still pending) so that the agent's
// single state machine reports progress, honours its timeout and survives
// being killed between steps; kubectl's drain helper blocks until the whole
// drain is over and reads DaemonSets, which a node may not.
//
// Which pods leave follows `kubectl drain`'s rules all the same (Filter, held
// to kubectl's own filters by a test): a pod no controller recreates, and a
// pod with emptyDir data, block the drain unless the Node's assignment
// allows deleting them with kubectl's two switches (contract.DrainOptions).
//
// The cordon is marked with contract.CordonedAnnotation in the same write
// that sets spec.unschedulable, so a restarted agent knows it is its own and
// a Node an administrator cordoned is never uncordoned by the agent.
package drain
