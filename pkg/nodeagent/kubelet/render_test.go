package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const localConfig = `# this node's own configuration
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
providerID: aws:///eu-west-1a/i-0123
tlsCertFile: /var/lib/kubelet/pki/kubelet.crt
tlsPrivateKeyFile: /var/lib/kubelet/pki/kubelet.key
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
healthzPort: 10248
maxPods: 110
`

const assignedConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
providerID: shared-and-wrong
staticPodPath: /shared/manifests
healthzPort: 9999
maxPods: 50
podPidsLimit: 9007199254740993
`

func writeLocal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "local.yaml")
	if err := os.WriteFile(path, []byte(localConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fieldsOf(t *testing.T, r Rendered) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("rendered output is not YAML: %v\n%s", err, r.Data)
	}
	return m
}

func TestRenderConfigMode(t *testing.T) {
	r := Renderer{Mode: ModeConfig, LocalConfigFile: writeLocal(t), LocalFields: DefaultLocalFields}
	local, err := r.Local()
	if err != nil {
		t.Fatal(err)
	}
	if local.Absent || string(local.Data) != localConfig {
		t.Fatalf("the local config is not written verbatim:\n%s", local.Data)
	}
	out, err := r.Assigned([]byte(assignedConfig))
	if err != nil {
		t.Fatal(err)
	}
	got := fieldsOf(t, out)
	want := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"providerID":               "aws:///eu-west-1a/i-0123",
		"tlsCertFile":              "/var/lib/kubelet/pki/kubelet.crt",
		"tlsPrivateKeyFile":        "/var/lib/kubelet/pki/kubelet.key",
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"healthzPort":              float64(10248),
		"maxPods":                  float64(50),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["staticPodPath"]; ok {
		t.Errorf("staticPodPath came from the ConfigMap although the node does not set it")
	}
	if !strings.Contains(string(out.Data), "podPidsLimit: 9007199254740993") {
		t.Errorf("a large integer lost precision:\n%s", out.Data)
	}
}

func TestRenderDropInMode(t *testing.T) {
	r := Renderer{Mode: ModeDropIn, LocalFields: DefaultLocalFields}
	local, err := r.Local()
	if err != nil || !local.Absent {
		t.Fatalf("Local() = %+v, %v; want an absent drop-in", local, err)
	}
	out, err := r.Assigned([]byte(assignedConfig))
	if err != nil {
		t.Fatal(err)
	}
	got := fieldsOf(t, out)
	for _, name := range []string{"providerID", "staticPodPath", "healthzPort"} {
		if _, ok := got[name]; ok {
			t.Errorf("the drop-in sets the node-local field %s", name)
		}
	}
	if got["maxPods"] != float64(50) || got["kind"] != "KubeletConfiguration" {
		t.Errorf("the drop-in lost shared fields: %v", got)
	}
}

func TestRenderErrors(t *testing.T) {
	missing := Renderer{Mode: ModeConfig, LocalConfigFile: filepath.Join(t.TempDir(), "missing"), LocalFields: DefaultLocalFields}
	if _, err := missing.Local(); err == nil {
		t.Error("Local() with a missing local file succeeded")
	}
	if _, err := missing.Assigned([]byte(assignedConfig)); err == nil {
		t.Error("Assigned() with a missing local file succeeded")
	}
	r := Renderer{Mode: ModeDropIn}
	for _, bad := range []string{"", "- a list", "just a string"} {
		if _, err := r.Assigned([]byte(bad)); err == nil {
			t.Errorf("Assigned(%q) succeeded", bad)
		}
	}
}

func TestRendererValidate(t *testing.T) {
	if err := (Renderer{Mode: ModeConfig, LocalConfigFile: "/x", LocalFields: DefaultLocalFields}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Renderer{Mode: ModeDropIn, LocalFields: []string{"maxPods"}}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Renderer{
		{Mode: ModeConfig},
		{Mode: "symlink"},
		{Mode: ModeDropIn, LocalFields: []string{"providerId"}},
		{Mode: ModeDropIn, LocalFields: []string{"kind"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	f := ConfigFile{Path: filepath.Join(dir, "conf.d", "50-nodeguard.conf")}
	absent := Rendered{Absent: true}
	content := Rendered{Data: []byte("maxPods: 5\n")}
	if ok, err := f.Matches(absent); err != nil || !ok {
		t.Fatalf("a missing file should match Absent: %v, %v", ok, err)
	}
	if err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.Matches(content); !ok {
		t.Fatal("the written file does not match")
	}
	if ok, _ := f.Matches(absent); ok {
		t.Fatal("an existing file matches Absent")
	}
	if ok, _ := f.Matches(Rendered{Data: []byte("maxPods: 6\n")}); ok {
		t.Fatal("different content matches")
	}
	if err := os.Chmod(f.Path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(Rendered{Data: []byte("maxPods: 6\n")}); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(f.Path); info.Mode().Perm() != 0o640 {
		t.Fatalf("rewriting changed the mode to %v", info.Mode().Perm())
	}
	if err := f.Write(absent); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(absent); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(f.Path))
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}
