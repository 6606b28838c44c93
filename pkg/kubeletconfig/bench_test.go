package kubeletconfig

import (
	"encoding/json"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// BenchmarkDecodeAndValidate measures what admission does for each ConfigMap
// write: decode, validate and check feature gates of a 4 KiB configuration.
func BenchmarkDecodeAndValidate(b *testing.B) {
	yamlData, err := os.ReadFile("testdata/kubelet-4k.yaml")
	if err != nil {
		b.Fatal(err)
	}
	jsonData, err := json.Marshal(loadTestConfig(b, "kubelet-4k.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	kubelet := version.MustParseGeneric("1.37.2")
	for _, input := range []struct {
		name string
		data []byte
	}{{"YAML", yamlData}, {"JSON", jsonData}} {
		b.Run(input.name, func(b *testing.B) {
			b.SetBytes(int64(len(input.data)))
			b.ReportAllocs()
			for b.Loop() {
				cfg, err := Decode(input.data)
				if err != nil {
					b.Fatal(err)
				}
				if errs := Validate(cfg); len(errs) > 0 {
					b.Fatal(errs)
				}
				if errs := CheckFeatureGates(cfg, kubelet); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
