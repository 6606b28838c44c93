package checkpoint

import (
	"reflect"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// FuzzDecodeEnvelope feeds arbitrary bytes to the decoder of every file in
// the state directory: it must refuse or decode, never panic; and what
// decodes must encode back to a file that decodes to the same value, so a
// checkpoint read after a crash is exactly what was written.
func FuzzDecodeEnvelope(f *testing.F) {
	ref := contract.ConfigMapVersion{Namespace: "kubelet-configs", Name: "pool", UID: "0b7a3c6e-1f2d-4c5b-9a8e-7d6c5b4a3f21", ResourceVersion: "42"}
	seeds := []struct {
		kind string
		v    any
	}{
		{checkpointKind, Checkpoint{Ref: ref, Key: "kubelet", HasKey: true, Config: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n", DownloadedAt: time.Unix(1, 0).UTC()}},
		{string(recordAssigned), refRecord{Ref: &ref}},
		{string(recordLastKnownGood), refRecord{}},
		{string(recordActive), Active{Ref: &ref, FileSHA256: "abc", AppliedAt: time.Unix(2, 0).UTC()}},
		{string(recordTrial), Trial{Ref: ref, BootID: "b", StartedSinceBoot: time.Minute, StartedAt: time.Unix(3, 0).UTC()}},
		{string(recordDrain), Drain{Ref: &ref, FileSHA256: "abc", StateFiles: []string{"cpu_manager_state"}, Reasons: []string{"why"},
			BootID: "b", StartedSinceBoot: time.Minute, StartedAt: time.Unix(4, 0).UTC()}},
	}
	for _, s := range seeds {
		data, err := encodeEnvelope(s.kind, s.v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte(`{"format":"x","kind":"trial","sha256":"","body":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, target := range []struct {
			kind string
			v    func() any
		}{
			{checkpointKind, func() any { return &Checkpoint{} }},
			{string(recordAssigned), func() any { return &refRecord{} }},
			{string(recordActive), func() any { return &Active{} }},
			{string(recordTrial), func() any { return &Trial{} }},
			{string(recordDrain), func() any { return &Drain{} }},
		} {
			v := target.v()
			if decodeEnvelope(data, target.kind, v) != nil {
				continue
			}
			again, err := encodeEnvelope(target.kind, reflect.ValueOf(v).Elem().Interface())
			if err != nil {
				t.Fatalf("re-encoding %s: %v", target.kind, err)
			}
			back := target.v()
			if err := decodeEnvelope(again, target.kind, back); err != nil || !reflect.DeepEqual(v, back) {
				t.Fatalf("%s did not survive a round trip: %v\n%#v\n%#v", target.kind, err, v, back)
			}
		}
	})
}
