package disruption

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
)

// The kubelet's defaults for the fields whose changes can need a drain, from
// pkg/kubelet/apis/config/v1beta1/defaults.go, pkg/kubelet/eviction
// (defaults_linux.go) and pkg/kubelet/kubeletconfig/defaults.go of
// k8s.io/kubernetes v1.37. They are copied as values because the product
// module must not import k8s.io/kubernetes; the comparison of an unset field
// with one set to its default depends on them being right.
const (
	defaultCPUManagerPolicy      = "none"
	cpuManagerPolicyStatic       = "static"
	defaultMemoryManagerPolicy   = kubeletconfigv1beta1.NoneMemoryManagerPolicy
	defaultTopologyManagerPolicy = kubeletconfigv1beta1.NoneTopologyManagerPolicy
	defaultTopologyManagerScope  = kubeletconfigv1beta1.ContainerTopologyManagerScope
	defaultMaxPods               = 110
	defaultCgroupDriver          = "cgroupfs"
	// defaultCgroupRoot is what the kubelet uses when cgroupRoot is empty
	// and cgroupsPerQOS is on (cmd/kubelet/app/server.go); with
	// cgroupsPerQOS off an empty root and "/" both put pods at the top.
	defaultCgroupRoot = "/"
	defaultIDsPerPod  = 65536
)

// defaultEvictionHard is the kubelet's evictionHard on Linux when the field
// is unset, or what mergeDefaultEvictionSettings fills in. nodeguard's
// agent runs next to Linux kubelets only.
var defaultEvictionHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "10%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "15%",
	"imagefs.inodesFree": "5%",
}

// view is a configuration as the kubelet runs it, reduced to what the
// classification looks at: defaults filled in and the kubelet's own rewrites
// applied.
type view struct {
	raw *kubeletconfigv1beta1.KubeletConfiguration

	cpuPolicy    string
	reservedCPUs cpus

	memoryPolicy   string
	reservedMemory string

	topologyPolicy string
	topologyScope  string

	maxPods     int32
	podsPerCore int32

	// kubeReserved and systemReserved are as the kubelet parses them after
	// reservedSystemCPUs has taken over their cpu entries.
	kubeReserved   map[string]string
	systemReserved map[string]string
	evictionHard   map[string]string
	mergeEviction  bool

	cgroupDriver  string
	cgroupRoot    string
	cgroupsPerQOS bool

	localStorageCapacityIsolation bool
	idsPerPod                     int64
}

// cpus is reservedSystemCPUs, parsed when it can be.
type cpus struct {
	raw string
	set cpuset.CPUSet
	ok  bool
}

func parseCPUs(raw string) cpus {
	set, err := cpuset.Parse(strings.TrimSpace(raw))
	return cpus{raw: raw, set: set, ok: err == nil}
}

// empty reports whether no CPUs are reserved by list; an unparseable list
// is not empty (the kubelet refuses it, and it differs from any other).
func (c cpus) empty() bool { return c.ok && c.set.IsEmpty() }

func (c cpus) equal(other cpus) bool {
	if c.ok && other.ok {
		return c.set.Equals(other.set)
	}
	return c.raw == other.raw
}

func (c cpus) String() string {
	if c.ok {
		return fmt.Sprintf("%q", c.set.String())
	}
	return fmt.Sprintf("%q", c.raw)
}

// Defaulted returns a copy of cfg (nil: a configuration with nothing set)
// with the defaults this package keeps filled in where the field is unset,
// as the kubelet fills them in when it loads its configuration
// (SetDefaults_KubeletConfiguration, and loadConfigFile's evictionHard) and
// as its /configz then shows them: cpuManagerPolicy, memoryManagerPolicy,
// topologyManagerPolicy and topologyManagerScope, maxPods, cgroupDriver,
// cgroupsPerQOS, localStorageCapacityIsolation,
// mergeDefaultEvictionSettings, enforceNodeAllocatable and evictionHard
// (with mergeDefaultEvictionSettings, the signals left out filled in). The
// kubelet's rewrites at start-up (reservedSystemCPUs over the cpu
// reservations, an empty cgroupRoot) are not applied: /configz shows the
// configuration before them. cfg is not modified.
func Defaulted(cfg *kubeletconfigv1beta1.KubeletConfiguration) *kubeletconfigv1beta1.KubeletConfiguration {
	out := &kubeletconfigv1beta1.KubeletConfiguration{}
	if cfg != nil {
		out = cfg.DeepCopy()
	}
	out.CPUManagerPolicy = orDefault(out.CPUManagerPolicy, defaultCPUManagerPolicy)
	out.MemoryManagerPolicy = orDefault(out.MemoryManagerPolicy, defaultMemoryManagerPolicy)
	out.TopologyManagerPolicy = orDefault(out.TopologyManagerPolicy, defaultTopologyManagerPolicy)
	out.TopologyManagerScope = orDefault(out.TopologyManagerScope, defaultTopologyManagerScope)
	if out.MaxPods == 0 {
		out.MaxPods = defaultMaxPods
	}
	out.CgroupDriver = orDefault(out.CgroupDriver, defaultCgroupDriver)
	out.CgroupsPerQOS = ptrOr(out.CgroupsPerQOS, true)
	out.LocalStorageCapacityIsolation = ptrOr(out.LocalStorageCapacityIsolation, true)
	out.MergeDefaultEvictionSettings = ptrOr(out.MergeDefaultEvictionSettings, false)
	if out.EnforceNodeAllocatable == nil {
		out.EnforceNodeAllocatable = []string{podsEnforcement}
	}
	out.EvictionHard = effectiveEvictionHard(out.EvictionHard, *out.MergeDefaultEvictionSettings)
	return out
}

// newView fills in the kubelet's defaults (Defaulted) and applies its
// rewrites at start-up; cfg may be nil, which is a configuration with
// nothing set. cfg is not modified.
func newView(cfg *kubeletconfigv1beta1.KubeletConfiguration) *view {
	if cfg == nil {
		cfg = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	d := Defaulted(cfg)
	v := &view{
		raw:                           cfg,
		cpuPolicy:                     d.CPUManagerPolicy,
		reservedCPUs:                  parseCPUs(cfg.ReservedSystemCPUs),
		memoryPolicy:                  d.MemoryManagerPolicy,
		reservedMemory:                canonicalReservedMemory(cfg.ReservedMemory),
		topologyPolicy:                d.TopologyManagerPolicy,
		topologyScope:                 d.TopologyManagerScope,
		maxPods:                       d.MaxPods,
		podsPerCore:                   cfg.PodsPerCore,
		kubeReserved:                  d.KubeReserved,
		systemReserved:                d.SystemReserved,
		evictionHard:                  d.EvictionHard,
		mergeEviction:                 *d.MergeDefaultEvictionSettings,
		cgroupDriver:                  d.CgroupDriver,
		cgroupRoot:                    orDefault(cfg.CgroupRoot, defaultCgroupRoot),
		cgroupsPerQOS:                 *d.CgroupsPerQOS,
		localStorageCapacityIsolation: *d.LocalStorageCapacityIsolation,
		idsPerPod:                     defaultIDsPerPod,
	}
	if cfg.UserNamespaces != nil && cfg.UserNamespaces.IDsPerPod != nil {
		v.idsPerPod = *cfg.UserNamespaces.IDsPerPod
	}
	// A non-empty reservedSystemCPUs replaces the cpu reservations: the
	// kubelet drops kubeReserved[cpu] and sets systemReserved[cpu] to the
	// number of CPUs listed, so allocatable cpu follows the list.
	if v.reservedCPUs.ok && !v.reservedCPUs.set.IsEmpty() {
		delete(v.kubeReserved, cpuResource)
		if v.systemReserved == nil {
			v.systemReserved = map[string]string{}
		}
		v.systemReserved[cpuResource] = fmt.Sprint(v.reservedCPUs.set.Size())
	}
	return v
}

// effectiveEvictionHard is the kubelet's rule (cmd/kubelet/app/server.go):
// unset means the defaults; set means exactly what is set, unless
// mergeDefaultEvictionSettings fills in the signals left out.
func effectiveEvictionHard(set map[string]string, merge bool) map[string]string {
	if set == nil {
		return maps.Clone(defaultEvictionHard)
	}
	result := maps.Clone(set)
	if merge {
		for signal, value := range defaultEvictionHard {
			if _, ok := result[signal]; !ok {
				result[signal] = value
			}
		}
	}
	return result
}

// staticCPUReservation describes what the static CPU manager policy
// reserves: the listed CPUs, or else the lowest-numbered CPUs by topology,
// as many as the cpu reservations add up to, rounded up. Two equal
// descriptions reserve the same CPUs on the same machine.
func (v *view) staticCPUReservation() string {
	if !v.reservedCPUs.empty() {
		return "CPUs " + v.reservedCPUs.String()
	}
	total, ok := sumQuantities(v.kubeReserved[cpuResource], v.systemReserved[cpuResource])
	if !ok {
		return fmt.Sprintf("cpu %q + %q", v.kubeReserved[cpuResource], v.systemReserved[cpuResource])
	}
	whole := (total.MilliValue() + 999) / 1000
	if whole == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%d CPUs", whole)
}

// canonicalReservedMemory writes reservedMemory in one form whatever the
// order of entries and the spelling of quantities, so that two lists the
// kubelet reads alike compare equal.
func canonicalReservedMemory(reservations []kubeletconfigv1beta1.MemoryReservation) string {
	var parts []string
	for _, r := range reservations {
		for name, q := range r.Limits {
			parts = append(parts, fmt.Sprintf("%d:%s=%s", r.NumaNode, name, q.String()))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

const cpuResource = "cpu"

// sumQuantities adds reservations written as strings, an empty one being
// zero; ok is false when one does not parse.
func sumQuantities(values ...string) (resource.Quantity, bool) {
	var total resource.Quantity
	for _, value := range values {
		if value == "" {
			continue
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(value))
		if err != nil {
			return resource.Quantity{}, false
		}
		total.Add(q)
	}
	return total, true
}

func orDefault(value, def string) string {
	if value == "" {
		return def
	}
	return value
}

// ptrOr is p, or a pointer to def when p is nil.
func ptrOr[T any](p *T, def T) *T {
	if p == nil {
		return &def
	}
	return p
}
