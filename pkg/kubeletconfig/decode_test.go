package kubeletconfig

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		input string
		// wantErr holds substrings the error must contain; empty means success.
		wantErr []string
		// wantIs is a sentinel the error must wrap.
		wantIs error
		check  func(t *testing.T, cfg *kubeletconfigv1beta1.KubeletConfiguration)
	}{
		{
			name:  "minimal YAML",
			input: header,
			check: func(t *testing.T, cfg *kubeletconfigv1beta1.KubeletConfiguration) {
				if cfg.MaxPods != 0 || cfg.EnableServer != nil {
					t.Errorf("decode applied defaults: maxPods=%d enableServer=%v", cfg.MaxPods, cfg.EnableServer)
				}
			},
		},
		{
			name:  "YAML with fields, comments and a leading document marker",
			input: "# kubelet\n---\n" + header + "maxPods: 250 # more pods\nevictionHard:\n  memory.available: 200Mi\nsyncFrequency: 30s\n",
			check: func(t *testing.T, cfg *kubeletconfigv1beta1.KubeletConfiguration) {
				if cfg.MaxPods != 250 || cfg.EvictionHard["memory.available"] != "200Mi" || cfg.SyncFrequency.Duration != 30*time.Second {
					t.Errorf("got maxPods=%d evictionHard=%v syncFrequency=%v", cfg.MaxPods, cfg.EvictionHard, cfg.SyncFrequency)
				}
				if cfg.APIVersion != "kubelet.config.k8s.io/v1beta1" || cfg.Kind != "KubeletConfiguration" {
					t.Errorf("type meta not kept: %+v", cfg.TypeMeta)
				}
			},
		},
		{
			name:  "JSON",
			input: `  {"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":42,"featureGates":{"NodeSwap":true}}`,
			check: func(t *testing.T, cfg *kubeletconfigv1beta1.KubeletConfiguration) {
				if cfg.MaxPods != 42 || !cfg.FeatureGates["NodeSwap"] {
					t.Errorf("got maxPods=%d featureGates=%v", cfg.MaxPods, cfg.FeatureGates)
				}
			},
		},
		{
			name:  "document end marker and trailing empty document",
			input: header + "maxPods: 3\n...\n---\n# nothing here\n",
			check: func(t *testing.T, cfg *kubeletconfigv1beta1.KubeletConfiguration) {
				if cfg.MaxPods != 3 {
					t.Errorf("maxPods = %d, want 3", cfg.MaxPods)
				}
			},
		},
		{name: "empty", input: "", wantIs: ErrEmpty},
		{name: "whitespace only", input: " \n\t\n", wantIs: ErrEmpty},
		{name: "too large", input: header + "staticPodPath: " + strings.Repeat("a", MaxConfigBytes) + "\n", wantIs: ErrTooLarge, wantErr: []string{"limit is 1048576"}},
		{name: "unknown field YAML", input: header + "maxPodz: 10\n", wantErr: []string{"strict decoding error", `unknown field "maxPodz"`}},
		{name: "unknown field JSON", input: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPodz":10}`, wantErr: []string{`unknown field "maxPodz"`}},
		{name: "unknown nested field", input: header + "authentication:\n  webhook:\n    enabled: true\n    cacheTtl: 2m\n", wantErr: []string{`unknown field "authentication.webhook.cacheTtl"`}},
		{name: "field with wrong case", input: header + "MaxPods: 10\n", wantErr: []string{`unknown field "MaxPods"`}},
		{name: "duplicate field YAML", input: header + "maxPods: 10\nmaxPods: 20\n", wantErr: []string{`"maxPods"`, "already set"}},
		{name: "duplicate field JSON", input: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":10,"maxPods":20}`, wantErr: []string{`duplicate field "maxPods"`}},
		{name: "wrong type YAML", input: header + "maxPods: lots\n", wantErr: []string{"maxPods", "int32"}},
		{name: "wrong type JSON", input: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","failSwapOn":"yes"}`, wantErr: []string{"failSwapOn", "bool"}},
		{name: "wrong nested type", input: header + "evictionHard: [memory.available]\n", wantErr: []string{"evictionHard"}},
		{name: "bad duration", input: header + "syncFrequency: 10 minutes\n", wantErr: []string{"decoding KubeletConfiguration", "10 minutes"}},
		{name: "int overflow", input: header + "maxPods: 3000000000\n", wantErr: []string{"maxPods"}},
		{name: "wrong apiVersion", input: "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", wantErr: []string{`apiVersion: Unsupported value: "kubelet.config.k8s.io/v1"`}},
		{name: "core apiVersion", input: "apiVersion: v1\nkind: ConfigMap\n", wantErr: []string{`apiVersion: Unsupported value: "v1"`, `kind: Unsupported value: "ConfigMap"`}},
		{name: "missing apiVersion", input: "kind: KubeletConfiguration\nmaxPods: 1\n", wantErr: []string{"apiVersion: Required value"}},
		{name: "missing kind", input: "apiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 1\n", wantErr: []string{"kind: Required value"}},
		{name: "missing both", input: "maxPods: 1\n", wantErr: []string{"apiVersion: Required value", "kind: Required value"}},
		{name: "comments only", input: "# nothing\n", wantErr: []string{"kind: Required value"}},
		{name: "other kind of the same group", input: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\nproviders: []\n", wantErr: []string{`kind: Unsupported value: "CredentialProviderConfig"`}},
		{name: "unregistered kind", input: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfig\n", wantErr: []string{`kind: Unsupported value: "KubeletConfig"`}},
		{name: "apiVersion of the wrong type", input: "apiVersion: 1\nkind: KubeletConfiguration\n", wantErr: []string{"decoding KubeletConfiguration"}},
		{name: "two documents", input: header + "maxPods: 1\n---\n" + header + "maxPods: 2\n", wantErr: []string{"2 YAML documents"}},
		{name: "YAML syntax error", input: header + "evictionHard:\n  memory.available: 1Gi\n bad indent: 1\n", wantErr: []string{"decoding KubeletConfiguration", "yaml"}},
		{name: "JSON syntax error", input: `{"apiVersion":"kubelet.config.k8s.io/v1beta1",`, wantErr: []string{"decoding KubeletConfiguration"}},
		{name: "JSON trailing data", input: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration"} {}`, wantErr: []string{"decoding KubeletConfiguration"}},
		{name: "YAML list", input: "- a\n- b\n", wantErr: []string{"must be a mapping"}},
		{name: "YAML scalar", input: "kubelet\n", wantErr: []string{"must be a mapping"}},
		{name: "YAML flow mapping is read as JSON, as the kubelet does", input: "{apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration}", wantErr: []string{"decoding KubeletConfiguration"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Decode([]byte(tc.input))
			if len(tc.wantErr) == 0 && tc.wantIs == nil {
				if err != nil {
					t.Fatalf("Decode() error = %v", err)
				}
				if tc.check != nil {
					tc.check(t, cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode() succeeded, want an error")
			}
			if cfg != nil {
				t.Errorf("Decode() returned a configuration along with error %v", err)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Decode() error = %v, want it to wrap %v", err, tc.wantIs)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Decode() error = %q, want it to contain %q", err, want)
				}
			}
			if len(err.Error()) > 2048 {
				t.Errorf("Decode() error is %d bytes long; it must not quote the input", len(err.Error()))
			}
		})
	}
}

func TestDecodeConfigMap(t *testing.T) {
	valid := header + "maxPods: 7\n"
	meta := metav1.ObjectMeta{Namespace: "kube-system", Name: "workers"}
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		key     string // "" means DecodeConfigMap
		wantErr []string
		wantIs  error
	}{
		{name: "contract key", cm: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"kubelet": valid}}},
		{name: "legacy key", key: "kubelet.yaml", cm: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"kubelet.yaml": valid}}},
		{name: "missing key", cm: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config": valid}}, wantIs: ErrNoKey, wantErr: []string{"kube-system/workers", "data[kubelet]"}},
		{name: "key in binaryData", cm: &corev1.ConfigMap{ObjectMeta: meta, BinaryData: map[string][]byte{"kubelet": []byte(valid)}}, wantIs: ErrNoKey, wantErr: []string{"binaryData"}},
		{name: "invalid content", cm: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"kubelet": header + "maxPods: x\n"}}, wantErr: []string{"kube-system/workers data[kubelet]", "maxPods"}},
		{name: "empty content", cm: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"kubelet": ""}}, wantIs: ErrEmpty},
		{name: "nil", cm: nil, wantErr: []string{"no ConfigMap"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg *kubeletconfigv1beta1.KubeletConfiguration
			var err error
			if tc.key == "" {
				cfg, err = DecodeConfigMap(tc.cm)
			} else {
				cfg, err = DecodeConfigMapKey(tc.cm, tc.key)
			}
			if len(tc.wantErr) == 0 && tc.wantIs == nil {
				if err != nil {
					t.Fatalf("error = %v", err)
				}
				if cfg.MaxPods != 7 {
					t.Errorf("maxPods = %d, want 7", cfg.MaxPods)
				}
				return
			}
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error = %v, want it to wrap %v", err, tc.wantIs)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

// loadTestConfig decodes a file under testdata, failing the test on error.
func loadTestConfig(tb testing.TB, name string) *kubeletconfigv1beta1.KubeletConfiguration {
	tb.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := Decode(data)
	if err != nil {
		tb.Fatalf("decoding testdata/%s: %v", name, err)
	}
	return cfg
}
