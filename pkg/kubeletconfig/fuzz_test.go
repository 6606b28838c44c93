package kubeletconfig

import (
	"encoding/json"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// FuzzDecode feeds arbitrary bytes to Decode and, when they decode, to the
// validators. Nothing may panic, and a configuration that decodes must
// survive a JSON round trip unchanged. The seed corpus is in
// testdata/fuzz/FuzzDecode; run longer with
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 5m ./pkg/kubeletconfig
func FuzzDecode(f *testing.F) {
	_, oldest, newest := FeatureGateCoverage()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Decode(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Decode() returned a configuration along with error %v", err)
			}
			return
		}
		Validate(cfg)
		CheckFeatureGates(cfg, oldest)
		CheckFeatureGates(cfg, newest)

		encoded, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("encoding a decoded configuration: %v", err)
		}
		again, err := Decode(encoded)
		if err != nil {
			t.Fatalf("decoding the re-encoded configuration %s: %v", encoded, err)
		}
		if !apiequality.Semantic.DeepEqual(cfg, again) {
			t.Fatalf("round trip changed the configuration: %v", Diff(cfg, again))
		}
	})
}
