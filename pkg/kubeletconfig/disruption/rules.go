package disruption

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The clauses a Reason is made of, so that the same effect reads the same
// way whichever field causes it.
const (
	shrinks      = "shrinks what the node holds"
	movesCgroups = "moves the pods' cgroups"
	realigns     = "changes how pods already admitted were aligned"
)

// rules are the checks of the fields that can need a drain; every other
// field is a restart. Each rule compares the two sides as the kubelet runs
// them and records, per field, why a drain is needed.
var rules = []func(*change){
	cpuManagerRule,
	memoryManagerRule,
	topologyManagerRule,
	podLimitsRule,
	reservationsRule,
	evictionHardRule,
	cgroupsRule,
	enforceNodeAllocatableRule,
	localStorageRule,
	userNamespacesRule,
	sysctlsRule,
	featureGatesRule,
}

// cpuManagerRule: the CPU manager checkpoints the policy that wrote its
// state and refuses to start under another one; its options change how
// CPUs were handed out; under the static policy the reserved CPUs must all
// still be in the shared pool the checkpoint recorded (validateState), so a
// different reservation is refused too, or worse, accepted with CPUs pinned
// to containers now counted as reserved.
func cpuManagerRule(c *change) {
	from, to := c.from, c.to
	if from.cpuPolicy != to.cpuPolicy {
		c.drain("cpuManagerPolicy", fmt.Sprintf("%q -> %q", from.cpuPolicy, to.cpuPolicy), "", cpuManagerState)
	}
	if !maps.Equal(from.raw.CPUManagerPolicyOptions, to.raw.CPUManagerPolicyOptions) {
		c.drain("cpuManagerPolicyOptions", fmt.Sprintf("%s -> %s", showMap(from.raw.CPUManagerPolicyOptions), showMap(to.raw.CPUManagerPolicyOptions)), "", cpuManagerState)
	}
	if from.cpuPolicy != cpuManagerPolicyStatic && to.cpuPolicy != cpuManagerPolicyStatic {
		return
	}
	fromReserved, toReserved := from.staticCPUReservation(), to.staticCPUReservation()
	if fromReserved == toReserved {
		return
	}
	effect := fmt.Sprintf("changes the CPUs the static CPU manager policy reserves (%s instead of %s)", toReserved, fromReserved)
	if !from.reservedCPUs.equal(to.reservedCPUs) {
		c.drain("reservedSystemCPUs", fmt.Sprintf("%s -> %s", from.reservedCPUs, to.reservedCPUs), effect, cpuManagerState)
	}
	for _, field := range reservationFields {
		before, after := field.raw(from)[cpuResource], field.raw(to)[cpuResource]
		if !sameQuantity(before, after) {
			c.drain(field.name, fmt.Sprintf("cpu %s -> %s", showValue(before), showValue(after)), effect, cpuManagerState)
		}
	}
}

// memoryManagerRule: like the CPU manager, the memory manager checkpoints
// its policy and refuses another; under the Static (or, on Windows,
// BestEffort) policy it also checks the recorded machine state against the
// memory reserved per NUMA node. Under the None policy reservedMemory is
// never read, so changing it alone is a restart.
func memoryManagerRule(c *change) {
	from, to := c.from, c.to
	if from.memoryPolicy != to.memoryPolicy {
		c.drain("memoryManagerPolicy", fmt.Sprintf("%q -> %q", from.memoryPolicy, to.memoryPolicy), "", memoryManagerState)
	}
	if from.memoryPolicy == defaultMemoryManagerPolicy && to.memoryPolicy == defaultMemoryManagerPolicy {
		return
	}
	if from.reservedMemory != to.reservedMemory {
		c.drain("reservedMemory", fmt.Sprintf("%s -> %s", from.reservedMemory, to.reservedMemory), "changes the memory the memory manager policy reserves per NUMA node", memoryManagerState)
	}
}

// topologyManagerRule: the topology manager keeps no state file, but the
// kubelet admits the pods it finds at start-up again, through the topology
// manager: pods admitted under another policy, scope or options can be
// rejected (TopologyAffinityError) or keep resources aligned the old way.
// Under the none policy the scope and options are not read at all.
func topologyManagerRule(c *change) {
	from, to := c.from, c.to
	if from.topologyPolicy != to.topologyPolicy {
		c.drain("topologyManagerPolicy", fmt.Sprintf("%q -> %q", from.topologyPolicy, to.topologyPolicy), realigns)
	}
	if from.topologyPolicy == defaultTopologyManagerPolicy && to.topologyPolicy == defaultTopologyManagerPolicy {
		return
	}
	if from.topologyScope != to.topologyScope {
		c.drain("topologyManagerScope", fmt.Sprintf("%q -> %q", from.topologyScope, to.topologyScope), realigns)
	}
	if !maps.Equal(from.raw.TopologyManagerPolicyOptions, to.raw.TopologyManagerPolicyOptions) {
		c.drain("topologyManagerPolicyOptions", fmt.Sprintf("%s -> %s", showMap(from.raw.TopologyManagerPolicyOptions), showMap(to.raw.TopologyManagerPolicyOptions)), realigns)
	}
}

// cgroupsRule: the driver, the root and the QoS hierarchy decide where the
// pods' cgroups are. After a change the kubelet looks for the running pods'
// cgroups where they are not, and their resource limits are no longer
// managed. The driver is compared as configured, although a container
// runtime that reports its own driver overrides it: conservatively.
func cgroupsRule(c *change) {
	from, to := c.from, c.to
	if from.cgroupDriver != to.cgroupDriver {
		c.drain("cgroupDriver", fmt.Sprintf("%q -> %q", from.cgroupDriver, to.cgroupDriver), movesCgroups)
	}
	if from.cgroupRoot != to.cgroupRoot {
		c.drain("cgroupRoot", fmt.Sprintf("%q -> %q", from.cgroupRoot, to.cgroupRoot), movesCgroups)
	}
	if from.cgroupsPerQOS != to.cgroupsPerQOS {
		c.drain("cgroupsPerQOS", fmt.Sprintf("%t -> %t", from.cgroupsPerQOS, to.cgroupsPerQOS), movesCgroups)
	}
}

// showMap writes an options map with sorted keys; unset and empty read
// alike, as they are alike to the kubelet.
func showMap(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	// Marshalling a map of strings cannot fail, and sorts the keys.
	data, _ := json.Marshal(m)
	return string(data)
}

// showValue writes a reservation or threshold, or says it is unset.
func showValue(value string) string {
	if value == "" {
		return "unset"
	}
	return value
}

func showPodsPerCore(n int32) string {
	if n <= 0 {
		return fmt.Sprintf("%d (unlimited)", n)
	}
	return fmt.Sprint(n)
}

// joinSorted writes clauses keyed by resource or signal in key order.
func joinSorted(byKey map[string]string) string {
	keys := slices.Sorted(maps.Keys(byKey))
	parts := make([]string, len(keys))
	for i, key := range keys {
		parts[i] = byKey[key]
	}
	return strings.Join(parts, ", ")
}
