package disruption

import (
	"cmp"
	"slices"
	"sync"
)

// Field is one top-level KubeletConfiguration field in the classification
// table: what changing it needs, and when.
type Field struct {
	// Name is the field's JSON name, as kubeletconfig.Diff reports it.
	Name string
	// Need is what a change of the field needs at worst.
	Need Need
	// When says which changes need it: "always" for every change of the
	// value as the kubelet runs it (defaults filled in), or the condition.
	When string
	// StateFiles are the state files a change may invalidate.
	StateFiles []string
	// Why says what in the kubelet makes it so.
	Why string
}

// Fields returns the classification table: every top-level
// KubeletConfiguration field (JSON name), what changing it needs and when,
// and which state files it invalidates, for the docs. Sorted by name.
func Fields() []Field {
	fields := loadFields()
	out := make([]Field, len(fields))
	for i, f := range fields {
		f.StateFiles = slices.Clone(f.StateFiles)
		out[i] = f
	}
	return out
}

var loadFields = sync.OnceValue(func() []Field {
	fields := slices.Concat(drainFields, restartFields)
	slices.SortFunc(fields, func(a, b Field) int { return cmp.Compare(a.Name, b.Name) })
	return fields
})

// always is the When of a field every change of which needs what it says.
const always = "always"

// drainFields are the fields some change of which needs a drain; the rules
// (rules.go, reservations.go, pods.go) decide which. Every other field is in
// restartFields.
var drainFields = []Field{
	{
		Name: "cpuManagerPolicy", Need: NeedDrain, When: always, StateFiles: []string{cpuManagerState},
		Why: `the CPU manager records its policy in its checkpoint and refuses to start under another ("configured policy ... differs from state checkpoint policy"); unset is "none"`,
	},
	{
		Name: "cpuManagerPolicyOptions", Need: NeedDrain, When: always, StateFiles: []string{cpuManagerState},
		Why: "the options decide how the CPUs recorded in the checkpoint were handed out (full physical cores, NUMA spreading, strict reservation); the assignments do not follow new options",
	},
	{
		Name: "reservedSystemCPUs", Need: NeedDrain, When: "when the CPU manager policy is static on either side, or when it reserves more CPUs",
		StateFiles: []string{cpuManagerState},
		Why:        "under the static policy the kubelet refuses a checkpoint whose shared pool lacks a reserved CPU (validateState), and CPUs pinned to containers may now be reserved; under any policy the list replaces the cpu reservations, so more CPUs shrink allocatable cpu",
	},
	{
		Name: "kubeReserved", Need: NeedDrain,
		When:       "when a reservation grows (added to systemReserved, resource by resource), or when its cpu changes the CPUs the static CPU manager policy reserves",
		StateFiles: []string{cpuManagerState},
		Why:        "allocatable is capacity minus the reservations; the kubelet admits the pods it finds at start-up again and rejects those that no longer fit; under the static policy the reservation rounded up to whole CPUs is the reserved set the checkpoint is checked against",
	},
	{
		Name: "systemReserved", Need: NeedDrain,
		When:       "when a reservation grows (added to kubeReserved, resource by resource), or when its cpu changes the CPUs the static CPU manager policy reserves",
		StateFiles: []string{cpuManagerState},
		Why:        "as kubeReserved",
	},
	{
		Name: "evictionHard", Need: NeedDrain,
		When: "when the memory.available or nodefs.available threshold grows (a percentage against a quantity, either way, counts as growth)",
		Why:  "the kubelet takes those two thresholds off allocatable memory and ephemeral-storage and rejects the pods that no longer fit; the other signals count in no allocatable; unset means the kubelet's defaults (memory.available 100Mi, nodefs.available 10%, ...), an empty map means none; 0% and 100% mean no threshold",
	},
	{
		Name: "mergeDefaultEvictionSettings", Need: NeedDrain,
		When: "when the thresholds it merges into evictionHard grow memory.available or nodefs.available",
		Why:  "it fills the default hard thresholds into an evictionHard that leaves them out, which counts as evictionHard growing",
	},
	{
		Name: "maxPods", Need: NeedDrain, When: "when it shrinks",
		Why: "the kubelet admits the pods it finds at start-up again and rejects those beyond the pod capacity (OutOfpods); unset is 110",
	},
	{
		Name: "podsPerCore", Need: NeedDrain, When: "when it shrinks (from 0, unlimited, to any limit included)",
		Why: "as maxPods: the pod capacity is the lower of maxPods and podsPerCore times the cores, which are not known here",
	},
	{
		Name: "memoryManagerPolicy", Need: NeedDrain, When: always, StateFiles: []string{memoryManagerState},
		Why: `the memory manager records its policy in its checkpoint and refuses to start under another; unset is "None"`,
	},
	{
		Name: "reservedMemory", Need: NeedDrain, When: "when the memory manager policy is other than None on either side",
		StateFiles: []string{memoryManagerState},
		Why:        "the Static policy checks the machine state in its checkpoint against the memory reserved per NUMA node and refuses to start when they differ; the None policy never reads reservedMemory",
	},
	{
		Name: "topologyManagerPolicy", Need: NeedDrain, When: always,
		Why: `the topology manager keeps no state file, but the kubelet admits the pods it finds at start-up again through it, and pods aligned under another policy can be rejected (TopologyAffinityError) or keep the old alignment; unset is "none"`,
	},
	{
		Name: "topologyManagerScope", Need: NeedDrain, When: "when the topology manager policy is other than none on either side",
		Why: `as topologyManagerPolicy; under the none policy the scope is not read; unset is "container"`,
	},
	{
		Name: "topologyManagerPolicyOptions", Need: NeedDrain, When: "when the topology manager policy is other than none on either side",
		Why: "as topologyManagerPolicy; under the none policy the options are not read",
	},
	{
		Name: "cgroupDriver", Need: NeedDrain, When: always,
		Why: `the driver decides the pods' cgroup paths; after a change the kubelet looks for running pods' cgroups where they are not; unset is "cgroupfs" (a runtime that reports its own driver overrides the field, so this is conservative)`,
	},
	{
		Name: "cgroupRoot", Need: NeedDrain, When: always,
		Why: `the root of the pods' cgroup hierarchy; pods already running stay under the old one; unset is "/"`,
	},
	{
		Name: "cgroupsPerQOS", Need: NeedDrain, When: always,
		Why: "decides whether pods' cgroups sit under a QoS hierarchy; pods already running stay where they were; unset is true",
	},
	{
		Name: "enforceNodeAllocatable", Need: NeedDrain, When: `when "pods" enforcement is turned on`,
		Why: `enforcing "pods" limits the cgroup above all pods to allocatable, which pods on a node not drained may already exceed (the kubelet retries until evictions bring usage down); unset is ["pods"]; the other keys limit system cgroups, not pods`,
	},
	{
		Name: "localStorageCapacityIsolation", Need: NeedDrain, When: "when it turns off",
		Why: "off, the node reports no ephemeral-storage capacity, and pods requesting some are rejected when the kubelet admits them again at start-up; unset is true",
	},
	{
		Name: "userNamespaces", Need: NeedDrain, When: "when idsPerPod changes",
		Why: "the kubelet reads back the ID range of each pod in a user namespace at start-up and refuses to start on a range of another length; unset is 65536",
	},
	{
		Name: "allowedUnsafeSysctls", Need: NeedDrain, When: "when an entry is removed (and no remaining wildcard covers it)",
		Why: "the sysctl admit handler rejects pods setting a sysctl no longer allowed (SysctlForbidden) when the kubelet admits them again at start-up",
	},
	{
		Name: "featureGates", Need: NeedDrain, When: "when a gate is set to false that was true or unset",
		Why: "a gate turned off can take away what running pods use: the kubelet rejects at admission a pod needing a node feature the gates no longer declare (PodFeatureUnsupported), and gates change how managers read their checkpoints; a gate left out goes back to its default, assumed on (the kubelet's defaults per version are not known here)",
	},
}
