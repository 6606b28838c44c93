package admission

import (
	"hash/maphash"
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

func TestStoredConfigs(t *testing.T) {
	checker := kubeletconfig.NewChecker(16)
	good := raw(t, eligibleCM("good", goodConfig)).Raw

	t.Run("remembered on the second sighting", func(t *testing.T) {
		s := newStoredConfigs()
		first, err := s.configOf(checker, good)
		if err != nil || first == nil || first.MaxPods != 110 {
			t.Fatalf("configOf = %+v, %v; want the configuration with maxPods 110", first, err)
		}
		if s.cache.Len() != 0 {
			t.Fatal("remembered on its first sighting")
		}
		if _, err := s.configOf(checker, good); err != nil {
			t.Fatal(err)
		}
		if s.cache.Len() != 1 {
			t.Fatalf("%d entries after the second sighting, want 1", s.cache.Len())
		}
		again, err := s.configOf(checker, good)
		if err != nil || again != first {
			t.Fatalf("a remembered object gave %p, %v; want the checker's configuration %p", again, err, first)
		}
	})

	t.Run("compared in full", func(t *testing.T) {
		s := newStoredConfigs()
		// Another object's entry under good's digest, as a collision would
		// leave it: it must not be taken for good's.
		impostor := &kubeletconfigv1beta1.KubeletConfiguration{MaxPods: 7}
		s.cache.Add(maphash.Bytes(s.seed, good), storedConfig{raw: string(raw(t, eligibleCM("other", goodConfig)).Raw), config: impostor})
		got, err := s.configOf(checker, good)
		if err != nil || got == impostor || got == nil || got.MaxPods != 110 {
			t.Fatalf("configOf = %+v, %v; want good's own configuration", got, err)
		}
	})

	t.Run("a copy of the object is kept", func(t *testing.T) {
		s := newStoredConfigs()
		body := append([]byte(nil), good...)
		for range 2 {
			if _, err := s.configOf(checker, body); err != nil {
				t.Fatal(err)
			}
		}
		// The review's body is recycled for the next request.
		for i := range body {
			body[i] = 'x'
		}
		v, ok := s.cache.Get(maphash.Bytes(s.seed, good))
		if !ok || v.(storedConfig).raw != string(good) {
			t.Fatal("the remembered object changed with the body it came from")
		}
	})

	for _, tc := range []struct {
		name string
		raw  []byte
		want string // error; "" for a nil configuration
	}{
		{"not eligible", raw(t, plainCM("plain", goodConfig)).Raw, ""},
		{"content that does not decode", raw(t, eligibleCM("broken", unknownField)).Raw, ""},
		{"no object", nil, ""},
		{"not a ConfigMap", []byte(`{"metadata":{"labels":7}}`), "metadata.labels"},
		{"not JSON", []byte(`[`), "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStoredConfigs()
			for range 3 {
				got, err := s.configOf(checker, tc.raw)
				if got != nil {
					t.Fatalf("configOf = %+v, want nil", got)
				}
				if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("configOf error %v, want one containing %q", err, tc.want)
				}
			}
			if tc.want != "" && s.cache.Len() != 0 {
				t.Fatal("an object that is not a ConfigMap was remembered")
			}
		})
	}

	t.Run("large objects are not remembered", func(t *testing.T) {
		s := newStoredConfigs()
		cm := eligibleCM("large", goodConfig)
		cm.Data["padding"] = strings.Repeat("p", maxStoredConfigBytes)
		large := raw(t, cm).Raw
		for range 3 {
			if got, err := s.configOf(checker, large); err != nil || got == nil || got.MaxPods != 110 {
				t.Fatalf("configOf = %+v, %v", got, err)
			}
		}
		if s.cache.Len() != 0 {
			t.Fatalf("a %d-byte object was remembered", len(large))
		}
	})
}
