package kubeletconfig

import (
	"encoding/json"
	"errors"
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

// FuzzDecodeJSONAgreesWithSerializer checks Decode's fast JSON path
// against k8s.io/apimachinery's strict serializer: the same documents are
// accepted, into the same configuration.
func FuzzDecodeJSONAgreesWithSerializer(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":110}`,
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPodz":110}`,
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":110,"maxPods":111}`,
		`{"apiVersion":"kubelet.config.k8s.io/v1","kind":"KubeletConfiguration"}`, `{"kind":"KubeletConfiguration"}`,
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","featureGates":{"A":true},"evictionHard":{"memory.available":"1Gi"}}`,
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":"110"}`, `{"apiVersion":1}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	decoder, err := loadDecoder()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, fastErr := decodeJSON(data)
		if errors.Is(fastErr, errLeftToSerializer) {
			return
		}
		ref, refErr := decodeWithSerializer(decoder, data)
		if (fastErr == nil) != (refErr == nil) {
			t.Fatalf("decodeJSON(%q) error %v, serializer error %v", data, fastErr, refErr)
		}
		if fastErr == nil && !apiequality.Semantic.DeepEqual(fast, ref) {
			t.Fatalf("decodeJSON(%q) and the serializer disagree: %v", data, Diff(ref, fast))
		}
	})
}
