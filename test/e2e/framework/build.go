package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// BuildWebhook builds cmd/webhook into dir and returns the binary's path.
func BuildWebhook(dir string) (string, error) { return BuildCommand(dir, "webhook") }

// BuildCommand builds ./cmd/<name> of this repository into dir.
func BuildCommand(dir, name string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building cmd/%s: %w\n%s", name, err, stderr.String())
	}
	return out, nil
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
