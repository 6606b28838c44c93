package v1alpha1

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The drain modes are the contract's, and the generated CRD offers exactly
// them with the same default: the enum marker on DrainMode spells the
// values out, and a value the agents do not know would be written on Nodes.
func TestDrainPoliciesAreTheContracts(t *testing.T) {
	modes := []DrainMode{DrainAuto, DrainAlways, DrainNever}
	for _, m := range modes {
		if m == "" || !contract.ValidDrainMode(string(m)) {
			t.Errorf("DrainMode %q is not a value of %s", m, contract.DrainAnnotation)
		}
	}
	if DefaultDrain != DrainAuto {
		t.Errorf("DefaultDrain = %q, want %q", DefaultDrain, DrainAuto)
	}

	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "manifests", "base", "crd", "nodeguard.dev_kubeletconfigrollouts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Default string   `json:"default"`
								Enum    []string `json:"enum"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(crd.Spec.Versions))
	}
	drain, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["drain"]
	if !ok {
		t.Fatal("the CRD has no spec.drain; run make generate")
	}
	var want []string
	for _, m := range modes {
		want = append(want, string(m))
	}
	if !slices.Equal(drain.Enum, want) || drain.Default != string(DefaultDrain) {
		t.Errorf("the CRD's spec.drain: enum %v, default %q; want %v, %q", drain.Enum, drain.Default, want, DefaultDrain)
	}
}
