package main

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestReadConfigMergesDropIns(t *testing.T) {
	tests := []struct {
		name    string
		dropIns map[string]string // path under the config dir -> content
		want    map[string]any    // fields of the merged configuration
		wantErr bool
	}{
		{name: "no drop-ins: the base", want: map[string]any{"maxPods": 10.0, "providerID": "base"}},
		{
			name:    "a drop-in overrides and adds; the base's other fields stay",
			dropIns: map[string]string{"90-nodeguard.conf": header + "maxPods: 42\nstaticPodURL: http://kubeletstub.invalid/crash\n"},
			want:    map[string]any{"maxPods": 42.0, "providerID": "base", "staticPodURL": "http://kubeletstub.invalid/crash"},
		},
		{
			name: "lexical order: the last one wins",
			dropIns: map[string]string{
				"90-nodeguard.conf": header + "maxPods: 90\n",
				"10-early.conf":     header + "maxPods: 10\nimageGCHighThresholdPercent: 80\n",
			},
			want: map[string]any{"maxPods": 90.0, "imageGCHighThresholdPercent": 80.0},
		},
		{
			name:    "only .conf files; subdirectories too",
			dropIns: map[string]string{"50-x.yaml": header + "maxPods: 50\n", ".90-nodeguard.conf123": header + "maxPods: 91\n", "sub/60-y.conf": header + "maxPods: 60\n"},
			want:    map[string]any{"maxPods": 60.0},
		},
		{
			name:    "null removes a field, as a JSON merge patch does",
			dropIns: map[string]string{"90-nodeguard.conf": header + "providerID: null\n"},
			want:    map[string]any{"providerID": nil},
		},
		{name: "a drop-in without apiVersion and kind", dropIns: map[string]string{"90-nodeguard.conf": "maxPods: 42\n"}, wantErr: true},
		{name: "a drop-in of another kind", dropIns: map[string]string{"90-nodeguard.conf": "apiVersion: v1\nkind: ConfigMap\n"}, wantErr: true},
		{name: "a drop-in that is not YAML", dropIns: map[string]string{"90-nodeguard.conf": "{not yaml"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := &stub{configPath: filepath.Join(dir, "config.yaml"), configDir: filepath.Join(dir, "config.d")}
			if err := os.WriteFile(s.configPath, []byte(header+"maxPods: 10\nproviderID: base\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.dropIns {
				path := filepath.Join(s.configDir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if len(tc.dropIns) == 0 {
				if err := os.MkdirAll(s.configDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			data, err := s.readConfig()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("readConfig = %s, want an error", data)
				}
				if b := behaviorOf(data, err); b.name != crash {
					t.Errorf("a kubelet with a bad drop-in behaves as %q, want %q", b.name, crash)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			for field, want := range tc.want {
				if got[field] != want {
					t.Errorf("%s = %v, want %v (merged: %s)", field, got[field], want, data)
				}
			}
		})
	}
}

func TestReadConfigMissingDir(t *testing.T) {
	dir := t.TempDir()
	s := &stub{configPath: filepath.Join(dir, "config.yaml"), configDir: filepath.Join(dir, "missing")}
	if err := os.WriteFile(s.configPath, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.readConfig(); err == nil {
		t.Fatal("a missing --config-dir was accepted; the kubelet refuses to start without it")
	}
}
