package kubeletconfig

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
)

// Values the kubelet accepts for enforceNodeAllocatable.
const (
	enforcePods                       = "pods"
	enforceSystemReserved             = "system-reserved"
	enforceSystemReservedCompressible = "system-reserved-compressible"
	enforceKubeReserved               = "kube-reserved"
	enforceKubeReservedCompressible   = "kube-reserved-compressible"
	enforceNone                       = "none"
)

// Swap behaviours of memorySwap.swapBehavior.
const (
	swapNone    = "NoSwap"
	swapLimited = "LimitedSwap"
)

// Policies of the CPU manager (lower case, unlike the memory manager's).
const (
	cpuManagerPolicyNone   = "none"
	cpuManagerPolicyStatic = "static"
)

func validateCgroups(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, oneOf(field.NewPath("cgroupDriver"), cfg.CgroupDriver, "cgroupfs", "systemd")...)
	if cfg.SystemCgroups != "" && cfg.CgroupRoot == "" {
		errs = append(errs, field.Required(field.NewPath("cgroupRoot"), "must be set when systemCgroups is set"))
	}
	errs = append(errs, oneOf(field.NewPath("memorySwap", "swapBehavior"), cfg.MemorySwap.SwapBehavior, swapNone, swapLimited)...)
	errs = append(errs, validateEnforceNodeAllocatable(cfg)...)
	for _, name := range sortedKeys(cfg.QOSReserved) {
		reservedPath := field.NewPath("qosReserved").Key(name)
		if name != string(corev1.ResourceMemory) {
			errs = append(errs, field.NotSupported(reservedPath, name, []corev1.ResourceName{corev1.ResourceMemory}))
			continue
		}
		value := cfg.QOSReserved[name]
		percent, err := strconv.ParseInt(strings.TrimRight(value, "%"), 10, 64)
		if !strings.HasSuffix(value, "%") || err != nil || percent < 0 || percent > 100 {
			errs = append(errs, field.Invalid(reservedPath, value, "must be a whole percentage between 0% and 100%"))
		}
	}
	return errs
}

func validateEnforceNodeAllocatable(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	enforcePath := field.NewPath("enforceNodeAllocatable")
	enforced, defaulted := cfg.EnforceNodeAllocatable, ""
	if enforced == nil {
		// The kubelet's default, which still needs cgroupsPerQOS.
		enforced, defaulted = []string{enforcePods}, " (by default)"
	}
	cgroupsPerQOS := cfg.CgroupsPerQOS == nil || *cfg.CgroupsPerQOS

	var errs field.ErrorList
	seen := map[string]bool{}
	for i, value := range enforced {
		valuePath := enforcePath.Index(i)
		if seen[value] {
			errs = append(errs, field.Duplicate(valuePath, value))
			continue
		}
		seen[value] = true
		switch value {
		case enforcePods:
		case enforceSystemReserved, enforceSystemReservedCompressible:
			if cfg.SystemReservedCgroup == "" {
				errs = append(errs, field.Required(field.NewPath("systemReservedCgroup"), fmt.Sprintf("must be set when %s contains %q", enforcePath, value)))
			}
		case enforceKubeReserved, enforceKubeReservedCompressible:
			if cfg.KubeReservedCgroup == "" {
				errs = append(errs, field.Required(field.NewPath("kubeReservedCgroup"), fmt.Sprintf("must be set when %s contains %q", enforcePath, value)))
			}
		case enforceNone:
			if len(enforced) > 1 {
				errs = append(errs, field.Invalid(valuePath, value, fmt.Sprintf("%q must be the only value", enforceNone)))
			}
			continue
		default:
			errs = append(errs, field.NotSupported(valuePath, value, []string{enforcePods, enforceSystemReserved, enforceSystemReservedCompressible,
				enforceKubeReserved, enforceKubeReservedCompressible, enforceNone}))
			continue
		}
		if !cgroupsPerQOS {
			errs = append(errs, field.Invalid(field.NewPath("cgroupsPerQOS"), false, fmt.Sprintf("must be true when %s contains %q%s", enforcePath, value, defaulted)))
		}
	}
	for _, pair := range [][2]string{{enforceSystemReserved, enforceSystemReservedCompressible}, {enforceKubeReserved, enforceKubeReservedCompressible}} {
		if seen[pair[0]] && seen[pair[1]] {
			errs = append(errs, field.Invalid(enforcePath, enforced, fmt.Sprintf("%q and %q are mutually exclusive", pair[0], pair[1])))
		}
	}
	return errs
}

// reservableResources are the resources systemReserved and kubeReserved take.
var reservableResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid"}

func validateReservations(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateReservedResources(field.NewPath("systemReserved"), cfg.SystemReserved)...)
	errs = append(errs, validateReservedResources(field.NewPath("kubeReserved"), cfg.KubeReserved)...)
	if cpus := cfg.ReservedSystemCPUs; cpus != "" {
		cpusPath := field.NewPath("reservedSystemCPUs")
		if _, err := cpuset.Parse(cpus); err != nil {
			errs = append(errs, field.Invalid(cpusPath, cpus, fmt.Sprintf("must be a CPU list such as 0-3,8: %v", err)))
		}
		if cfg.SystemReservedCgroup != "" || cfg.KubeReservedCgroup != "" {
			errs = append(errs, field.Forbidden(cpusPath, "may not be used together with systemReservedCgroup or kubeReservedCgroup"))
		}
	}
	errs = append(errs, validateReservedMemory(cfg.ReservedMemory)...)
	return errs
}

func validateReservedResources(reservedPath *field.Path, reserved map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(reserved) {
		namePath := reservedPath.Key(name)
		if !isReservable(corev1.ResourceName(name)) {
			errs = append(errs, field.NotSupported(namePath, name, reservableResources))
			continue
		}
		value := reserved[name]
		quantity, err := resource.ParseQuantity(value)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(namePath, value, fmt.Sprintf("must be a quantity: %v", err)))
		case quantity.Sign() < 0:
			errs = append(errs, field.Invalid(namePath, value, "must not be negative"))
		}
	}
	return errs
}

func isReservable(name corev1.ResourceName) bool {
	for _, reservable := range reservableResources {
		if name == reservable {
			return true
		}
	}
	return false
}

func validateReservedMemory(reservations []kubeletconfigv1beta1.MemoryReservation) field.ErrorList {
	var errs field.ErrorList
	seen := map[int32]map[corev1.ResourceName]bool{}
	for i, reservation := range reservations {
		entryPath := field.NewPath("reservedMemory").Index(i)
		if seen[reservation.NumaNode] == nil {
			seen[reservation.NumaNode] = map[corev1.ResourceName]bool{}
		}
		for _, resourceName := range sortedKeys(reservation.Limits) {
			name := string(resourceName)
			limitPath := entryPath.Child("limits").Key(name)
			if resourceName != corev1.ResourceMemory && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
				errs = append(errs, field.NotSupported(limitPath, name, []string{string(corev1.ResourceMemory), corev1.ResourceHugePagesPrefix + "<size>"}))
			}
			if quantity := reservation.Limits[resourceName]; quantity.Sign() <= 0 {
				errs = append(errs, field.Invalid(limitPath, quantity.String(), "must be greater than zero"))
			}
			if seen[reservation.NumaNode][resourceName] {
				errs = append(errs, field.Duplicate(limitPath, fmt.Sprintf("%s for NUMA node %d", name, reservation.NumaNode)))
			}
			seen[reservation.NumaNode][resourceName] = true
		}
	}
	return errs
}

func validateResourceManagers(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	cpuPolicyPath := field.NewPath("cpuManagerPolicy")
	errs = append(errs, oneOf(cpuPolicyPath, cfg.CPUManagerPolicy, cpuManagerPolicyNone, cpuManagerPolicyStatic)...)
	if cfg.CPUManagerPolicy == cpuManagerPolicyStatic && !reservesCPUs(cfg) {
		// Without reserved CPUs the static policy could hand out every CPU
		// exclusively; the kubelet refuses to start.
		errs = append(errs, field.Invalid(cpuPolicyPath, cfg.CPUManagerPolicy, "requires CPUs reserved through reservedSystemCPUs, systemReserved.cpu or kubeReserved.cpu"))
	}
	errs = append(errs, nonNegativeDuration(field.NewPath("cpuManagerReconcilePeriod"), cfg.CPUManagerReconcilePeriod)...)

	errs = append(errs, oneOf(field.NewPath("memoryManagerPolicy"), cfg.MemoryManagerPolicy,
		kubeletconfigv1beta1.NoneMemoryManagerPolicy, kubeletconfigv1beta1.StaticMemoryManagerPolicy)...)
	if cfg.MemoryManagerPolicy == kubeletconfigv1beta1.StaticMemoryManagerPolicy {
		errs = append(errs, validateStaticMemoryReservation(cfg)...)
	}

	errs = append(errs, oneOf(field.NewPath("topologyManagerPolicy"), cfg.TopologyManagerPolicy,
		kubeletconfigv1beta1.NoneTopologyManagerPolicy, kubeletconfigv1beta1.BestEffortTopologyManagerPolicy,
		kubeletconfigv1beta1.RestrictedTopologyManagerPolicy, kubeletconfigv1beta1.SingleNumaNodeTopologyManagerPolicy)...)
	errs = append(errs, oneOf(field.NewPath("topologyManagerScope"), cfg.TopologyManagerScope,
		kubeletconfigv1beta1.ContainerTopologyManagerScope, kubeletconfigv1beta1.PodTopologyManagerScope)...)
	return errs
}

func reservesCPUs(cfg *kubeletconfigv1beta1.KubeletConfiguration) bool {
	if cfg.ReservedSystemCPUs != "" {
		return true
	}
	for _, reserved := range []map[string]string{cfg.SystemReserved, cfg.KubeReserved} {
		if quantity, err := resource.ParseQuantity(reserved[string(corev1.ResourceCPU)]); err == nil && quantity.Sign() > 0 {
			return true
		}
	}
	return false
}

// validateStaticMemoryReservation mirrors the memory manager's start-up check:
// the memory reserved per NUMA node must add up to what Node Allocatable holds
// back (systemReserved + kubeReserved + the hard eviction threshold). A
// percentage threshold depends on the node's capacity, so then nothing can be
// checked here.
func validateStaticMemoryReservation(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	want, known := hardEvictionMemory(cfg)
	if !known {
		return nil
	}
	for _, reserved := range []map[string]string{cfg.SystemReserved, cfg.KubeReserved} {
		value, set := reserved[string(corev1.ResourceMemory)]
		if !set {
			continue
		}
		quantity, err := resource.ParseQuantity(value)
		if err != nil {
			return nil // reported by validateReservedResources
		}
		want.Add(quantity)
	}
	var total resource.Quantity
	for _, reservation := range cfg.ReservedMemory {
		total.Add(reservation.Limits[corev1.ResourceMemory])
	}
	if total.Cmp(want) != 0 {
		return field.ErrorList{field.Invalid(field.NewPath("reservedMemory"), total.String(),
			fmt.Sprintf("with memoryManagerPolicy %s the memory reserved over all NUMA nodes must equal systemReserved.memory + kubeReserved.memory + evictionHard[%s] (%s)",
				kubeletconfigv1beta1.StaticMemoryManagerPolicy, signalMemoryAvailable, want.String()))}
	}
	return nil
}

// oneOf accepts the empty string, which leaves the choice to the kubelet's
// default.
func oneOf(path *field.Path, value string, allowed ...string) field.ErrorList {
	if value == "" {
		return nil
	}
	for _, candidate := range allowed {
		if value == candidate {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, value, allowed)}
}
