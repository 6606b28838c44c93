package kubeletconfig

import (
	"slices"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestDiff(t *testing.T) {
	base := "maxPods: 110\nevictionHard:\n  memory.available: 100Mi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\nauthentication:\n  webhook:\n    enabled: true\n"
	tests := []struct {
		name     string
		old, new string // YAML bodies; "nil" stands for a nil configuration
		want     []string
	}{
		{name: "same", old: base, new: base},
		{name: "both nil", old: "nil", new: "nil"},
		{name: "reordered and reformatted", old: base, new: "authentication: {webhook: {enabled: true}}\nreservedMemory:\n- limits: {memory: 1024Mi}\n  numaNode: 0\nevictionHard: {memory.available: 100Mi}\nmaxPods: 110\n"},
		{name: "scalar changed", old: base, new: base + "port: 10251\n", want: []string{"port"}},
		{name: "map entry changed", old: "evictionHard:\n  memory.available: 100Mi\n", new: "evictionHard:\n  memory.available: 200Mi\n", want: []string{"evictionHard"}},
		{name: "nested field changed", old: base, new: "maxPods: 110\nevictionHard:\n  memory.available: 100Mi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\nauthentication:\n  webhook:\n    enabled: false\n", want: []string{"authentication"}},
		{name: "empty map equals absent map", old: "featureGates: {}\n", new: ""},
		{name: "default written out is a change", old: "", new: "enableServer: true\n", want: []string{"enableServer"}},
		{name: "removed and added", old: "maxPods: 10\n", new: "podPidsLimit: 100\n", want: []string{"maxPods", "podPidsLimit"}},
		{name: "from nil", old: "nil", new: "maxPods: 10\n", want: []string{"apiVersion", "kind", "maxPods"}},
		{name: "to nil", old: "maxPods: 10\n", new: "nil", want: []string{"apiVersion", "kind", "maxPods"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(body string) *kubeletconfigv1beta1.KubeletConfiguration {
				if body == "nil" {
					return nil
				}
				return decodeBody(t, body)
			}
			if got := Diff(parse(tc.old), parse(tc.new)); !slices.Equal(got, tc.want) {
				t.Errorf("Diff() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDiffNamesEveryField(t *testing.T) {
	// Every top-level field of a fully populated configuration shows up once,
	// under its JSON name.
	cfg := loadTestConfig(t, "kubelet-4k.yaml")
	got := Diff(nil, cfg)
	for _, name := range []string{"apiVersion", "kind", "evictionHard", "featureGates", "resolvConf", "containerRuntimeEndpoint", "logging"} {
		if !slices.Contains(got, name) {
			t.Errorf("Diff(nil, production) = %q, missing %q", got, name)
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("Diff() = %q, want sorted and unique", got)
	}
}

func TestIsTopLevelField(t *testing.T) {
	for name, want := range map[string]bool{"staticPodPath": true, "featureGates": true, "kind": true, "authentication": true,
		"authentication.anonymous": false, "StaticPodPath": false, "": false} {
		if got := IsTopLevelField(name); got != want {
			t.Errorf("IsTopLevelField(%q) = %v", name, got)
		}
	}
}
