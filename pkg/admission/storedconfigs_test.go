package admission

import (
	"strings"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

func TestStoredConfigs(t *testing.T) {
	checker := kubeletconfig.NewChecker(16)
	good := raw(t, eligibleCM("good", goodConfig)).Raw

	t.Run("remembered on the second sighting", func(t *testing.T) {
		s := newStoredConfigs(checker)
		first, err := s.configOf(good)
		if err != nil || first == nil || first.MaxPods != 110 {
			t.Fatalf("configOf = %+v, %v; want the configuration with maxPods 110", first, err)
		}
		if s.configs.Len() != 0 {
			t.Fatal("remembered on its first sighting")
		}
		if _, err := s.configOf(good); err != nil {
			t.Fatal(err)
		}
		if s.configs.Len() != 1 {
			t.Fatalf("%d entries after the second sighting, want 1", s.configs.Len())
		}
		again, err := s.configOf(good)
		if err != nil || again != first {
			t.Fatalf("a remembered object gave %p, %v; want the checker's configuration %p", again, err, first)
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
			s := newStoredConfigs(checker)
			for range 3 {
				got, err := s.configOf(tc.raw)
				if got != nil {
					t.Fatalf("configOf = %+v, want nil", got)
				}
				if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("configOf error %v, want one containing %q", err, tc.want)
				}
			}
			if tc.want != "" && s.configs.Len() != 0 {
				t.Fatal("an object that is not a ConfigMap was remembered")
			}
		})
	}

	t.Run("large objects are not remembered", func(t *testing.T) {
		s := newStoredConfigs(checker)
		cm := eligibleCM("large", goodConfig)
		cm.Data["padding"] = strings.Repeat("p", maxStoredConfigBytes)
		large := raw(t, cm).Raw
		for range 3 {
			if got, err := s.configOf(large); err != nil || got == nil || got.MaxPods != 110 {
				t.Fatalf("configOf = %+v, %v", got, err)
			}
		}
		if s.configs.Len() != 0 {
			t.Fatalf("a %d-byte object was remembered", len(large))
		}
	})
}
