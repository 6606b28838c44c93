package disruption

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Allocatable is what a Node whose capacity is capacity (its
// status.capacity) reports allocatable once its kubelet runs cfg (nil: the
// kubelet's defaults), as the kubelet computes it (pkg/kubelet/cm,
// GetNodeAllocatableReservation; pkg/kubelet/nodestatus, MachineInfo):
// every resource of capacity less kubeReserved, systemReserved and the
// hard eviction thresholds that count in allocatable (memory.available off
// memory, nodefs.available off ephemeral-storage; a percentage of the
// capacity), never below zero; memory less the hugepages capacity; and pods
// from cfg's maxPods, or podsPerCore times the CPUs where that is lower.
// reservedSystemCPUs replaces the cpu reservations, as the kubelet has it.
// A reservation that does not parse is an error (admission refuses such a
// configuration, the kubelet too).
//
// It is an estimate from the Node's own report, for warnings before
// anything moves: the kubelet's own report after the change is what a
// trial judges.
func Allocatable(cfg *kubeletconfigv1beta1.KubeletConfiguration, capacity corev1.ResourceList) (corev1.ResourceList, error) {
	v := newView(cfg)
	reserved := corev1.ResourceList{}
	for _, m := range []map[string]string{v.kubeReserved, v.systemReserved} {
		for name, value := range m {
			q, err := resource.ParseQuantity(strings.TrimSpace(value))
			if err != nil {
				return nil, fmt.Errorf("reservation %s=%q: %w", name, value, err)
			}
			sum := reserved[corev1.ResourceName(name)]
			sum.Add(q)
			reserved[corev1.ResourceName(name)] = sum
		}
	}
	for signal, name := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
		t := parseThreshold(v.evictionHard[signal])
		switch {
		case !t.ok:
			return nil, fmt.Errorf("evictionHard %s=%q does not parse", signal, v.evictionHard[signal])
		case t.none:
			continue
		}
		q := resource.Quantity{}
		if t.quantity != nil {
			q = t.quantity.DeepCopy()
		} else if c, ok := capacity[name]; ok {
			q = *resource.NewQuantity(int64(float64(c.Value())*t.percentage/100), resource.BinarySI)
		}
		sum := reserved[name]
		sum.Add(q)
		reserved[name] = sum
	}

	out := corev1.ResourceList{}
	for name, c := range capacity {
		value := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			value.Sub(r)
		}
		if value.Sign() < 0 {
			value.Set(0)
		}
		out[name] = value
	}
	for name, c := range capacity {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			memory := out[corev1.ResourceMemory]
			memory.Sub(c)
			if memory.Sign() < 0 {
				memory.Set(0)
			}
			out[corev1.ResourceMemory] = memory
		}
	}
	pods := int64(v.maxPods)
	if cpu, ok := capacity[corev1.ResourceCPU]; ok && v.podsPerCore > 0 {
		cores := cpu.Value()
		pods = int64(math.Min(float64(cores*int64(v.podsPerCore)), float64(pods)))
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	return out, nil
}

// floorResources are what a configuration's reservations take from: the
// resources kubeReserved, systemReserved and the hard eviction thresholds
// hold back.
var floorResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// BelowFloor names each of cpu, memory and ephemeral-storage of which cfg
// leaves a Node of capacity less allocatable than percent of its capacity
// ("cpu: 50m of 2 allocatable (2%)"), none when percent is 0 or cfg leaves
// enough. A resource the capacity does not report is not judged.
func BelowFloor(cfg *kubeletconfigv1beta1.KubeletConfiguration, capacity corev1.ResourceList, percent int) ([]string, error) {
	if percent <= 0 {
		return nil, nil
	}
	allocatable, err := Allocatable(cfg, capacity)
	if err != nil {
		return nil, err
	}
	var below []string
	for _, name := range floorResources {
		c, ok := capacity[name]
		if !ok || c.Sign() <= 0 {
			continue
		}
		a := allocatable[name]
		// In thousandths, so that millicores compare as well as bytes.
		share := float64(a.MilliValue()) / float64(c.MilliValue()) * 100
		if share < float64(percent) {
			below = append(below, fmt.Sprintf("%s: %s of %s allocatable (%.0f%%)", name, a.String(), c.String(), math.Floor(share)))
		}
	}
	return below, nil
}
