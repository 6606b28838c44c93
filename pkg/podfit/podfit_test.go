package podfit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestRequestsCountsAsTheScheduler(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: list("cpu", "2")}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "1Gi")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "example.com/gpu", "1")}},
		},
		Overhead: list("memory", "100Mi"),
	}}
	got := Requests(pod)
	// The init container's 2 CPUs exceed the containers' 1: the larger
	// counts. Overhead adds to memory.
	for name, want := range list("cpu", "2", "memory", "1124Mi", "example.com/gpu", "1") {
		if q := got[name]; q.Cmp(want) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), want.String())
		}
	}
}

func TestCheck(t *testing.T) {
	pods := []corev1.ResourceList{
		list("cpu", "300m", "memory", "100Mi", "hugepages-2Mi", "4Mi"),
		list("cpu", "300m", "example.com/gpu", "1"),
		list(),
		list("cpu", "0"),
	}
	for _, tc := range []struct {
		name        string
		allocatable corev1.ResourceList
		want        string
	}{
		{"everything fits", list("pods", "110", "cpu", "2", "memory", "1Gi", "hugepages-2Mi", "8Mi", "example.com/gpu", "1"), ""},
		{"exactly full fits", list("pods", "4", "cpu", "600m", "memory", "100Mi", "hugepages-2Mi", "4Mi", "example.com/gpu", "1"), ""},
		{"maxPods below the pods", list("pods", "2", "cpu", "2", "memory", "1Gi", "hugepages-2Mi", "8Mi", "example.com/gpu", "1"),
			"pods: 4 requested, 2 allocatable, 2 short"},
		{"reservations", list("pods", "110", "cpu", "50m", "memory", "1Gi", "hugepages-2Mi", "8Mi", "example.com/gpu", "1"),
			"cpu: 600m requested, 50m allocatable, 550m short"},
		{"every kind short, in order", list("pods", "1", "cpu", "100m", "memory", "10Mi"),
			"pods: 4 requested, 1 allocatable, 3 short; cpu: 600m requested, 100m allocatable, 500m short; memory: 100Mi requested, 10Mi allocatable, 90Mi short; example.com/gpu: 1 requested, 0 allocatable, 1 short; hugepages-2Mi: 4Mi requested, 0 allocatable, 4Mi short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Describe(Check(pods, tc.allocatable)); got != tc.want {
				t.Errorf("Check = %q\nwant    %q", got, tc.want)
			}
		})
	}
}

func TestCheckIgnoresWhatNoPodRequests(t *testing.T) {
	if short := Check([]corev1.ResourceList{list("cpu", "0")}, list("pods", "1")); len(short) != 0 {
		t.Errorf("a resource requested at zero, or not at all, is short: %v", short)
	}
	if short := Check(nil, list("pods", "0")); len(short) != 0 {
		t.Errorf("no pods cannot be short: %v", short)
	}
}
