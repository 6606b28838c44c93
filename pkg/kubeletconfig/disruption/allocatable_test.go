package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func TestAllocatable(t *testing.T) {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"), corev1.ResourcePods: resource.MustParse("110"),
		"hugepages-2Mi": resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("2"),
	}
	for _, tc := range []struct {
		name   string
		config string
		want   map[corev1.ResourceName]string
	}{
		{"defaults: 100Mi and 10% held back for eviction, memory less the hugepages", "",
			map[corev1.ResourceName]string{"cpu": "2", "memory": "7068Mi", "ephemeral-storage": "92160Mi", "pods": "110", "hugepages-2Mi": "1Gi", "example.com/gpu": "2"}},
		{"reservations", "kubeReserved: {cpu: 1950m, memory: 1Gi}\nsystemReserved: {memory: 1Gi}\nevictionHard: {}\n",
			map[corev1.ResourceName]string{"cpu": "50m", "memory": "5Gi", "ephemeral-storage": "100Gi"}},
		{"reservations beyond capacity stop at zero", "kubeReserved: {cpu: \"4\"}\n",
			map[corev1.ResourceName]string{"cpu": "0"}},
		{"reservedSystemCPUs replaces the cpu reservations", "reservedSystemCPUs: \"0\"\nkubeReserved: {cpu: 1500m}\n",
			map[corev1.ResourceName]string{"cpu": "1"}},
		{"maxPods", "maxPods: 2\n", map[corev1.ResourceName]string{"pods": "2"}},
		{"podsPerCore below maxPods", "podsPerCore: 3\n", map[corev1.ResourceName]string{"pods": "6"}},
		{"a percentage threshold", "evictionHard: {memory.available: \"50%\"}\n", map[corev1.ResourceName]string{"memory": "3Gi", "ephemeral-storage": "100Gi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg *kubeletconfigv1beta1.KubeletConfiguration
			if tc.config != "" {
				cfg = &kubeletconfigv1beta1.KubeletConfiguration{}
				if err := yaml.UnmarshalStrict([]byte(tc.config), cfg); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Allocatable(cfg, capacity)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if q := got[name]; q.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s = %s, want %s", name, q.String(), want)
				}
			}
		})
	}
	if _, err := Allocatable(&kubeletconfigv1beta1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "lots"}}, capacity); err == nil {
		t.Error("a reservation that does not parse gave no error")
	}
}

func TestBelowFloor(t *testing.T) {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "1950m", "memory": "1Gi"}, EvictionHard: map[string]string{}}
	below, err := BelowFloor(cfg, capacity, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(below) != 1 || below[0] != "cpu: 50m of 2 allocatable (2%)" {
		t.Errorf("BelowFloor = %q", below)
	}
	if below, _ := BelowFloor(cfg, capacity, 0); len(below) != 0 {
		t.Errorf("a floor of 0 warned: %q", below)
	}
	if below, _ := BelowFloor(nil, capacity, 90); len(below) != 0 {
		t.Errorf("the defaults are below 90%%: %q", below)
	}
}
