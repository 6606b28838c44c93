package disruption

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The kubelet source these tests read is the k8s.io/kubernetes release the
// kubelet binaries are built from (hack/tools/kube/go.mod), so that bumping
// it re-checks the classification's premises.
const kubeToolsModule = "../../../hack/tools/kube/go.mod"

var kubernetesRequire = regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v[^\s]+)`)

// kubeSource is where the pinned k8s.io/kubernetes source is, found once
// per test binary: the module cache if it already holds it, or else `go mod
// download`. skip is set, instead of err, when the download failed because
// there is no network.
var kubeSource = sync.OnceValues(func() (source kubeSourceDir, err error) {
	goMod, err := os.ReadFile(kubeToolsModule)
	if err != nil {
		return source, fmt.Errorf("reading the pinned release: %w", err)
	}
	if bytes.Contains(goMod, []byte("k8s.io/kubernetes =>")) {
		return source, fmt.Errorf("%s replaces k8s.io/kubernetes; teach this test to follow the replacement", kubeToolsModule)
	}
	match := kubernetesRequire.FindSubmatch(goMod)
	if match == nil {
		return source, fmt.Errorf("%s requires no k8s.io/kubernetes", kubeToolsModule)
	}
	source.version = string(match[1])

	// Downloading k8s.io/kubernetes takes a while on a slow network, but
	// not forever.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		return source, fmt.Errorf("the go command is needed to find the kubelet source: %w", err)
	}
	if out, err := exec.CommandContext(ctx, goTool, "env", "GOMODCACHE").Output(); err == nil {
		dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+source.version)
		if _, err := os.Stat(filepath.Join(dir, "pkg", "kubelet")); err == nil {
			source.dir = dir
			return source, nil
		}
	}

	tmp, err := os.MkdirTemp("", "nodeguard-kubesource-")
	if err != nil {
		return source, fmt.Errorf("making a directory to run go mod download in: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, goTool, "mod", "download", "-json", "k8s.io/kubernetes@"+source.version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var result struct{ Dir, Error string }
	if err := json.Unmarshal(out, &result); err != nil && runErr == nil {
		return source, fmt.Errorf("reading go mod download's answer: %w", err)
	}
	if runErr != nil || result.Error != "" || result.Dir == "" {
		message := strings.TrimSpace(result.Error + "\n" + stderr.String())
		if isOffline(message) {
			source.skip = fmt.Sprintf("k8s.io/kubernetes@%s is not in the module cache and cannot be downloaded without a network: %s", source.version, message)
			return source, nil
		}
		if runErr == nil {
			runErr = errors.New("no module directory")
		}
		return source, fmt.Errorf("go mod download k8s.io/kubernetes@%s: %w: %s", source.version, runErr, message)
	}
	source.dir = result.Dir
	return source, nil
})

type kubeSourceDir struct {
	version, dir, skip string
}

// offlineSigns are what the go command says when it cannot reach the
// module proxy.
var offlineSigns = []string{
	"dial tcp", "no such host", "network is unreachable", "connection refused",
	"i/o timeout", "TLS handshake timeout", "GOPROXY=off", "GOFLAGS=-mod=vendor", "temporary failure in name resolution",
}

func isOffline(message string) bool {
	lower := strings.ToLower(message)
	for _, sign := range offlineSigns {
		if strings.Contains(lower, strings.ToLower(sign)) {
			return true
		}
	}
	return false
}

// kubeletSource returns the directory of the pinned k8s.io/kubernetes
// source, or skips the test when it cannot be had offline.
func kubeletSource(t *testing.T) string {
	t.Helper()
	source, err := kubeSource()
	if err != nil {
		t.Fatal(err)
	}
	if source.skip != "" {
		t.Skip(source.skip)
	}
	return source.dir
}

// goFiles lists the non-test Go files under dir.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() && entry.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !entry.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files under %s", dir)
	}
	return files
}
