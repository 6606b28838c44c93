package settings

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
		check   func(*Settings) bool
	}{
		{"full", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nminKubeletVersion: v1.35.2\nallowNodeSelfAssignment: true\nforbiddenDynamicFields: [staticPodPath]\nexemptUsers: [break-glass]\n", "",
			func(s *Settings) bool {
				return s.MinKubeletVersion.String() == "1.35.2" && s.AllowNodeSelfAssignment && s.IsForbiddenField("staticPodPath") && s.IsExempt("break-glass") && !s.IsExempt("admin")
			}},
		{"minimal", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\n", "", func(s *Settings) bool { return s.MinKubeletVersion == nil && !s.AllowNodeSelfAssignment }},
		{"unknown field", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nallowNodeSelfAsignment: true\n", `unknown field "allowNodeSelfAsignment"`, nil},
		{"wrong type", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nallowNodeSelfAssignment: maybe\n", "allowNodeSelfAssignment", nil},
		{"wrong version", "apiVersion: config.nodeguard.dev/v1\nkind: NodeguardPolicy\n", "apiVersion/kind", nil},
		{"missing kind", "apiVersion: config.nodeguard.dev/v1alpha1\n", "apiVersion/kind", nil},
		{"bad version", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nminKubeletVersion: latest\n", "minKubeletVersion", nil},
		{"bad field name", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nforbiddenDynamicFields: [staticPodPat]\n", "forbiddenDynamicFields[0]", nil},
		{"node exempt", "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nexemptUsers: ['system:node:n1']\n", "nodes cannot be exempt", nil},
		{"not YAML", "\x00\x01{", "policy.yaml", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.data), "policy.yaml")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(s) {
				t.Fatalf("Parse() = %+v, %v", s, err)
			}
		})
	}
}

func TestWatcherReloadsAndKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	write := func(content string) {
		// Replace atomically, as a ConfigMap volume does.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	header := "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\n"
	write(header + "minKubeletVersion: 1.30.0\n")
	reg := prometheus.NewRegistry()
	w, err := NewWatcher(path, nil, time.Hour, reg)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	w.OnChange(func(s *Settings) { seen = append(seen, s.MinKubeletVersion.String()) })
	ctx := context.Background()

	write(header + "minKubeletVersion: 1.31.0\n")
	w.Reload(ctx)
	if got := w.Current().MinKubeletVersion.String(); got != "1.31.0" || w.Degraded() != "" {
		t.Fatalf("after good reload: %s, degraded %q", got, w.Degraded())
	}
	write(header + "minKubeletVersion: [\n")
	w.Reload(ctx)
	if got := w.Current().MinKubeletVersion.String(); got != "1.31.0" {
		t.Fatalf("bad reload replaced the settings: %s", got)
	}
	if !strings.Contains(w.Degraded(), "last reload failed") {
		t.Fatalf("Degraded() = %q", w.Degraded())
	}
	if v := testutil.ToFloat64(w.metrics.lastLoadSuccess); v != 0 {
		t.Fatalf("last_load_success = %v after a failed reload", v)
	}
	write(header + "minKubeletVersion: 1.32.0\n")
	w.Reload(ctx)
	if w.Degraded() != "" || testutil.ToFloat64(w.metrics.lastLoadSuccess) != 1 {
		t.Fatal("recovery not reported")
	}
	if strings.Join(seen, ",") != "1.30.0,1.31.0,1.32.0" {
		t.Fatalf("listeners saw %v", seen)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.Reload(ctx)
	if w.Current().MinKubeletVersion.String() != "1.32.0" || w.Degraded() == "" {
		t.Fatal("a vanished file must keep the last good settings and be reported")
	}
}

func TestNewWatcher(t *testing.T) {
	if _, err := NewWatcher(filepath.Join(t.TempDir(), "missing"), nil, time.Second, nil); err == nil {
		t.Fatal("missing file accepted at start")
	}
	fallback := &Settings{AllowNodeSelfAssignment: true}
	w, err := NewWatcher("", fallback, time.Second, nil)
	if err != nil || w.Current() != fallback {
		t.Fatalf("no file: %v %v", w, err)
	}
}
