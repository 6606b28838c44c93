package podfit

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Requests is what pod requests, as the scheduler and the kubelet's
// admission count it. The spec is what a kubelet admits against, so
// in-place resizes reported in the status are not considered.
func Requests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// Shortfall is a resource the pods need more of than the Node has.
type Shortfall struct {
	Resource corev1.ResourceName
	// Requested is what the pods request together; for pods, how many
	// they are.
	Requested resource.Quantity
	// Allocatable is the Node's allocatable (zero when it has none).
	Allocatable resource.Quantity
}

// Short is by how much.
func (s Shortfall) Short() resource.Quantity {
	short := s.Requested.DeepCopy()
	short.Sub(s.Allocatable)
	return short
}

// String says it in words: "cpu: 1500m requested, 50m allocatable, 1450m
// short".
func (s Shortfall) String() string {
	short := s.Short()
	return fmt.Sprintf("%s: %s requested, %s allocatable, %s short", s.Resource, s.Requested.String(), s.Allocatable.String(), short.String())
}

// Total adds requests up, resource by resource, and counts them as pods.
func Total(requests []corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(requests)), resource.DecimalSI)}
	for _, r := range requests {
		for name, q := range r {
			if name == corev1.ResourcePods {
				continue
			}
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total
}

// Check returns every resource the pods whose requests are given need
// more of than allocatable, in the order pods, cpu, memory,
// ephemeral-storage, then the others by name; none when they fit. A
// resource the pods do not request (or request zero of) is never short,
// as the scheduler skips it; one they request that allocatable lacks is
// short by all of it.
func Check(requests []corev1.ResourceList, allocatable corev1.ResourceList) []Shortfall {
	var short []Shortfall
	for name, want := range Total(requests) {
		if want.Sign() <= 0 {
			continue
		}
		have := allocatable[name]
		if want.Cmp(have) > 0 {
			short = append(short, Shortfall{Resource: name, Requested: want, Allocatable: have.DeepCopy()})
		}
	}
	slices.SortFunc(short, func(a, b Shortfall) int {
		if ra, rb := rank(a.Resource), rank(b.Resource); ra != rb {
			return ra - rb
		}
		return strings.Compare(string(a.Resource), string(b.Resource))
	})
	return short
}

// first are the resources every Node has, in the order messages name them.
var first = []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

func rank(name corev1.ResourceName) int {
	if i := slices.Index(first, name); i >= 0 {
		return i
	}
	return len(first)
}

// Describe joins shortfalls for a message: "pods: 4 requested, 2
// allocatable, 2 short; cpu: ...".
func Describe(short []Shortfall) string {
	parts := make([]string, len(short))
	for i, s := range short {
		parts[i] = s.String()
	}
	return strings.Join(parts, "; ")
}
