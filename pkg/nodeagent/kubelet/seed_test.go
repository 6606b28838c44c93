package kubelet

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/renameio/v2"
	"k8s.io/klog/v2"
)

// kubeadmConfig is a kubelet file as kubeadm writes it, with the odd bytes
// (no final newline, a comment, CRLF, a tab) a copy must keep.
const kubeadmConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\r\n# kubeadm\nkind: KubeletConfiguration\nauthentication:\n\tx509: {}\nmaxPods: 110"

// seedFiles is a node's two files: the kubelet's with content, the local
// one absent, in a directory of its own, as on a node.
func seedFiles(t *testing.T, kubeletData string) (local, kubeletPath string) {
	t.Helper()
	root := t.TempDir()
	kubeletPath = filepath.Join(root, "var-lib-kubelet", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(kubeletPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeletPath, []byte(kubeletData), 0o644); err != nil {
		t.Fatal(err)
	}
	local = filepath.Join(root, "etc-nodeguard", "kubelet-local.yaml")
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	return local, kubeletPath
}

func seedWithLog(t *testing.T, local, kubeletPath string) ([]string, error) {
	t.Helper()
	var logged []string
	logger := funcr.New(func(prefix, args string) { logged = append(logged, prefix+" "+args) }, funcr.Options{})
	err := SeedLocalConfig(klog.NewContext(context.Background(), logger), local, kubeletPath)
	return logged, err
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSeedLocalConfigWhenMissing(t *testing.T) {
	local, kubeletPath := seedFiles(t, kubeadmConfig)
	logged, err := seedWithLog(t, local, kubeletPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, local); !bytes.Equal(got, []byte(kubeadmConfig)) {
		t.Errorf("seeded %q, want the kubelet's file byte for byte %q", got, kubeadmConfig)
	}
	if got := readFile(t, kubeletPath); !bytes.Equal(got, []byte(kubeadmConfig)) {
		t.Errorf("the kubelet's file changed: %q", got)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "Seeded") || !strings.Contains(logged[0], local) || !strings.Contains(logged[0], kubeletPath) {
		t.Errorf("logged %q, want one line naming both files", logged)
	}
	// The seeded file is the node's own configuration: the agent writes it
	// verbatim when nothing is assigned.
	rendered, err := Renderer{Mode: ModeConfig, LocalConfigFile: local, LocalFields: DefaultLocalFields}.Local()
	if err != nil || !bytes.Equal(rendered.Data, []byte(kubeadmConfig)) {
		t.Errorf("the local configuration renders as %q, %v", rendered.Data, err)
	}
	// Seeding again finds the file and leaves it alone.
	if logged, err := seedWithLog(t, local, kubeletPath); err != nil || len(logged) != 0 {
		t.Errorf("second seeding: %v, logged %q; want nothing done", err, logged)
	}
}

func TestSeedLocalConfigCreatesItsDirectory(t *testing.T) {
	_, kubeletPath := seedFiles(t, kubeadmConfig)
	local := filepath.Join(t.TempDir(), "absent", "kubelet-local.yaml")
	if _, err := seedWithLog(t, local, kubeletPath); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, local); !bytes.Equal(got, []byte(kubeadmConfig)) {
		t.Errorf("seeded %q", got)
	}
}

// TestSeedLocalConfigLeavesAnExistingFile: whatever the local file holds,
// even nothing, it is the operator's, and the kubelet's file does not
// matter, not even when the agent wrote it.
func TestSeedLocalConfigLeavesAnExistingFile(t *testing.T) {
	written, err := Renderer{Mode: ModeConfig, LocalConfigFile: writeLocal(t), LocalFields: DefaultLocalFields}.Assigned([]byte(assignedConfig))
	if err != nil {
		t.Fatal(err)
	}
	for name, existing := range map[string]string{"a configuration": localConfig, "empty": ""} {
		for kubeletName, kubeletData := range map[string]string{"kubeadm's": kubeadmConfig, "the agent's": string(written.Data)} {
			t.Run(name+"/"+kubeletName, func(t *testing.T) {
				local, kubeletPath := seedFiles(t, kubeletData)
				if err := os.WriteFile(local, []byte(existing), 0o600); err != nil {
					t.Fatal(err)
				}
				if logged, err := seedWithLog(t, local, kubeletPath); err != nil || len(logged) != 0 {
					t.Fatalf("SeedLocalConfig = %v, logged %q; want nothing done", err, logged)
				}
				if got := readFile(t, local); string(got) != existing {
					t.Errorf("the local file changed to %q", got)
				}
			})
		}
	}
}

// TestSeedLocalConfigRefusesTheAgentsFile: a kubelet file rendered from a
// ConfigMap is not the node's own configuration.
func TestSeedLocalConfigRefusesTheAgentsFile(t *testing.T) {
	written, err := Renderer{Mode: ModeConfig, LocalConfigFile: writeLocal(t), LocalFields: DefaultLocalFields}.Assigned([]byte(assignedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if !owned(written.Data) {
		t.Fatalf("a rendered file is not recognised as the agent's:\n%s", written.Data)
	}
	for name, data := range map[string][]byte{
		"as rendered": written.Data,
		// An operator who added a comment above the header.
		"header on a later line": append([]byte("# edited by hand\n"), written.Data...),
	} {
		t.Run(name, func(t *testing.T) {
			local, kubeletPath := seedFiles(t, string(data))
			_, err := seedWithLog(t, local, kubeletPath)
			if err == nil {
				t.Fatal("seeded the local configuration from a file the agent wrote")
			}
			for _, want := range []string{local, kubeletPath, "written by the nodeguard agent", "restore", "by hand", "docs/install.md", "Runbook"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if _, statErr := os.Lstat(local); !errors.Is(statErr, fs.ErrNotExist) {
				t.Errorf("the local file exists after a refusal: %v", statErr)
			}
			entries, _ := os.ReadDir(filepath.Dir(local))
			if len(entries) != 0 {
				t.Errorf("left in the local file's directory: %v", entries)
			}
		})
	}
	// The header only counts at the start of a line.
	if owned([]byte("maxPods: 1 " + ownedMarker + "\n")) {
		t.Error("the header in the middle of a line counts as the agent's")
	}
}

// TestSeedLocalConfigAfterACrash: a seeding killed before its rename leaves
// renameio's temporary file, with part of the content, and no local file.
// The next start seeds from scratch and removes the leftover.
func TestSeedLocalConfigAfterACrash(t *testing.T) {
	local, kubeletPath := seedFiles(t, kubeadmConfig)
	pending, err := renameio.NewPendingFile(local, renameio.WithTempDir(filepath.Dir(local)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pending.WriteString(kubeadmConfig[:20]); err != nil {
		t.Fatal(err)
	}
	if err := pending.File.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := seedWithLog(t, local, kubeletPath); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, local); !bytes.Equal(got, []byte(kubeadmConfig)) {
		t.Errorf("seeded %q after a crash, want %q", got, kubeadmConfig)
	}
	if _, err := os.Lstat(pending.Name()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the leftover %s is still there: %v", pending.Name(), err)
	}
}

func TestSeedLocalConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		kubelet func(t *testing.T, path string)
		want    []string
		is      error
	}{
		{
			name:    "missing",
			kubelet: func(t *testing.T, path string) { mustRemove(t, path) },
			want:    []string{"does not exist either"},
			is:      fs.ErrNotExist,
		},
		{
			// Root reads files whatever their mode, so a directory stands
			// for a file that cannot be read.
			name: "unreadable",
			kubelet: func(t *testing.T, path string) {
				mustRemove(t, path)
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"cannot be seeded"},
		},
		{
			name: "empty",
			kubelet: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte("\n  \n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"is empty"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			local, kubeletPath := seedFiles(t, kubeadmConfig)
			tt.kubelet(t, kubeletPath)
			_, err := seedWithLog(t, local, kubeletPath)
			if err == nil {
				t.Fatal("SeedLocalConfig succeeded")
			}
			for _, want := range append(tt.want, local, kubeletPath) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if _, statErr := os.Lstat(local); !errors.Is(statErr, fs.ErrNotExist) {
				t.Errorf("a local file exists after the error: %v", statErr)
			}
		})
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
