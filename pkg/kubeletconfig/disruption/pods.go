package disruption

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The rules of this file are about the pods already on the node: at
// start-up the kubelet admits every pod it finds again, through the same
// admit handlers as a new pod (HandlePodAdditions in pkg/kubelet), and fails
// those it would not admit now. A change that makes the node accept less
// rejects running pods unless they were moved away first.

// podLimitsRule: the node's pod capacity is maxPods, or podsPerCore times
// the cores when that is lower. The kubelet admits the pods it finds at
// start-up again, and rejects (OutOfpods) those beyond a lower capacity.
// The number of cores is not known here, so either limit shrinking counts.
func podLimitsRule(c *change) {
	from, to := c.from, c.to
	if to.maxPods < from.maxPods {
		c.drain("maxPods", fmt.Sprintf("%d -> %d", from.maxPods, to.maxPods), shrinks)
	}
	// 0 is unlimited.
	if to.podsPerCore > 0 && (from.podsPerCore <= 0 || to.podsPerCore < from.podsPerCore) {
		c.drain("podsPerCore", fmt.Sprintf("%s -> %d", showPodsPerCore(from.podsPerCore), to.podsPerCore), shrinks)
	}
}

// localStorageRule: with localStorageCapacityIsolation off the node reports
// no ephemeral-storage capacity, and pods requesting some are rejected when
// the kubelet admits them again at start-up.
func localStorageRule(c *change) {
	if c.from.localStorageCapacityIsolation && !c.to.localStorageCapacityIsolation {
		c.drain("localStorageCapacityIsolation", "true -> false", "removes ephemeral-storage from what the node holds")
	}
}

// userNamespacesRule: the kubelet records each user-namespaced pod's ID
// range, idsPerPod long, in the pod's directory and reads them back at
// start-up; a range of another length is an error that stops the kubelet
// (pkg/kubelet/userns). The ranges go away with the pods.
func userNamespacesRule(c *change) {
	if c.from.idsPerPod != c.to.idsPerPod {
		c.drain("userNamespaces", fmt.Sprintf("idsPerPod %d -> %d", c.from.idsPerPod, c.to.idsPerPod), "no longer fits the ID ranges of running pods")
	}
}

// enforceNodeAllocatableRule: enforcing "pods" puts a memory limit of
// allocatable on the cgroup above every pod. Turned on for a node that was
// not drained, the pods may already use more than that, and the kubelet
// says so itself (enforceNodeAllocatableCgroups): it retries until
// evictions bring usage down. An unset list is the default, ["pods"].
func enforceNodeAllocatableRule(c *change) {
	enforced := func(v *view) bool {
		if v.raw.EnforceNodeAllocatable == nil {
			return true
		}
		return slices.Contains(v.raw.EnforceNodeAllocatable, podsEnforcement)
	}
	if !enforced(c.from) && enforced(c.to) {
		c.drain("enforceNodeAllocatable", fmt.Sprintf("%s -> %s", showList(c.from.raw.EnforceNodeAllocatable), showList(c.to.raw.EnforceNodeAllocatable)),
			"puts the pods under a memory limit they may already exceed")
	}
}

const podsEnforcement = "pods"

// sysctlsRule: the sysctl admit handler rejects a pod whose unsafe sysctls
// are not allowed (SysctlForbidden), so removing an entry rejects the
// running pods that set it. An entry still matched by a remaining wildcard
// ("net.*" for "net.core.somaxconn") is not a removal.
func sysctlsRule(c *change) {
	remaining := c.to.raw.AllowedUnsafeSysctls
	var removed []string
	for _, entry := range c.from.raw.AllowedUnsafeSysctls {
		if !slices.ContainsFunc(remaining, func(allowed string) bool { return sysctlCovers(allowed, entry) }) {
			removed = append(removed, entry)
		}
	}
	if len(removed) > 0 {
		slices.Sort(removed)
		c.drain("allowedUnsafeSysctls", "", fmt.Sprintf("no longer allows %s, which pods already running may set", strings.Join(slices.Compact(removed), ", ")))
	}
}

// sysctlCovers reports whether an allowlist entry allows everything entry
// does: the same name, or a wildcard ("prefix*") over it.
func sysctlCovers(allowed, entry string) bool {
	if allowed == entry {
		return true
	}
	prefix, wildcard := strings.CutSuffix(allowed, "*")
	return wildcard && strings.HasPrefix(strings.TrimSuffix(entry, "*"), prefix)
}

// featureGatesRule: a gate turned off can take away what running pods use.
// The kubelet declares node features from its gates and rejects at
// admission a pod that needs one the node no longer declares
// (PodFeatureUnsupported), and gates change how managers read their state
// (PodLevelResourceManagers, for the CPU and memory managers' pod-level
// assignments). Only gates set to false count: a gate that was true and is
// left out now goes back to its default, which for the gates operators
// clean up (graduated ones) is on; the kubelet's defaults per version are
// not known here.
func featureGatesRule(c *change) {
	var turnedOff []string
	for _, gate := range slices.Sorted(maps.Keys(c.to.raw.FeatureGates)) {
		if c.to.raw.FeatureGates[gate] {
			continue
		}
		was, set := c.from.raw.FeatureGates[gate]
		switch {
		case !set:
			turnedOff = append(turnedOff, gate+" unset -> false")
		case was:
			turnedOff = append(turnedOff, gate+" true -> false")
		}
	}
	if len(turnedOff) > 0 {
		c.drain("featureGates", strings.Join(turnedOff, ", "), "turns off what pods already running may use")
	}
}

// showList writes a list field, or says it is unset.
func showList(list []string) string {
	if list == nil {
		return "unset"
	}
	return fmt.Sprintf("%q", list)
}
