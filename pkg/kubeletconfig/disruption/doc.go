// Package disruption classifies a change of kubelet configuration by what it
// needs on the node: a kubelet restart, which pods survive, or a drain, with
// the kubelet's state files to remove while it is stopped. The node agent
// asks it before applying a configuration (and before rolling one back);
// docs/disruptive-changes.md is the reference, its field table generated
// from Fields.
//
// # Why some changes need a drain
//
// The kubelet keeps its resource managers' state in checkpoint files and
// refuses to start when the configuration no longer matches what they
// recorded: the CPU manager with another policy, other options, or (under
// the static policy) other reserved CPUs; the memory manager with another
// policy or (under Static) other reserved memory. The kubelet's own message
// says what to do: "please drain this node and delete the ... checkpoint
// file ... before restarting Kubelet". Other changes start fine but hurt
// the pods already there, because at start-up the kubelet admits every pod
// it finds again: a smaller pod capacity, larger reservations or hard
// eviction thresholds, a narrower sysctl allowlist, a stricter topology
// policy or a gate turned off reject running pods; a different cgroup
// layout loses track of them; a different user-namespace length stops the
// kubelet.
//
// # Comparing
//
// Classify compares the two configurations as the kubelet runs them: an
// unset field is the kubelet's default (v1.37's, kept here as values
// because the product module does not import k8s.io/kubernetes), and the
// kubelet's own rewrites are applied (reservedSystemCPUs replaces the cpu
// reservations; mergeDefaultEvictionSettings fills in evictionHard). Where
// the answer depends on the node (its cores, its capacity), the comparison
// is conservative: a maxPods or podsPerCore that shrinks, and a hard
// eviction threshold that turns from a percentage into a quantity or back,
// count as shrinking what the node holds.
//
// Plan.StateFiles only ever holds names from this package's fixed list
// (StateFiles: cpu_manager_state and memory_manager_state); the kubelet's
// other state files (the device manager's, DRA's, the allocation and
// shutdown managers') belong to pods or to no field, and are never removed.
// TestStateFilesAgainstKubeletSource checks both lists against the source of
// the kubelet release nodeguard is built against, so a state file added
// upstream fails the tests until it is placed in one of them.
//
// Fields lists every top-level field; a field added to
// k8s.io/kubelet/config/v1beta1 fails TestFieldsCoverKubeletConfiguration
// until it is classified.
package disruption
