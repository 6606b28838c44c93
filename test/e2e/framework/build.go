package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// BuildWebhook builds cmd/webhook into dir and returns the binary's path.
func BuildWebhook(dir string) (string, error) { return BuildCommand(dir, "webhook") }

// BuildCommand builds ./cmd/<name> of this repository into dir.
func BuildCommand(dir, name string) (string, error) {
	return BuildPackage(context.Background(), dir, "./cmd/"+name)
}

// BuildPackage builds the main package pkg of this repository, given as
// ./path, into dir. Cancelling ctx stops the build.
func BuildPackage(ctx context.Context, dir, pkg string) (string, error) {
	paths, err := buildPackages(ctx, dir, pkg)
	if err != nil {
		return "", err
	}
	return paths[0], nil
}

// NodeBinaries are the programs a node runs.
type NodeBinaries struct {
	// Agent is cmd/agent.
	Agent string
	// KubeletUnit is test/kubeletunit, playing systemd for the kubelet.
	KubeletUnit string
	// Kubelet and FakeCRI are the real kubelet and its fake container
	// runtime, built by hack/testbin.sh.
	Kubelet, FakeCRI string
	// KubeletStub is test/kubeletstub, standing in for the kubelet where
	// a test needs a fault no real kubelet produces.
	KubeletStub string
	// Containers are what nodes on RuntimeContainerd need
	// (BuildContainerBinaries); empty for suites that run none.
	Containers ContainerBinaries
}

// BuildNodeBinaries builds the agent, the kubelet unit and the kubelet stub
// into dir, once for any number of nodes, and finds the kubelet and fakecri
// in the control plane's binary directory. Cancelling ctx stops the build.
func BuildNodeBinaries(ctx context.Context, dir string) (NodeBinaries, error) {
	paths, err := buildPackages(ctx, dir, "./cmd/agent", "./test/kubeletunit", "./test/kubeletstub")
	if err != nil {
		return NodeBinaries{}, err
	}
	b := NodeBinaries{Agent: paths[0], KubeletUnit: paths[1], KubeletStub: paths[2]}
	if b.Kubelet, err = controlplane.Binary("kubelet"); err != nil {
		return NodeBinaries{}, err
	}
	if b.FakeCRI, err = controlplane.Binary("fakecri"); err != nil {
		return NodeBinaries{}, err
	}
	return b, nil
}

// buildPackages builds main packages of this repository, given as ./path,
// into dir with one go command (so they build in parallel), and returns the
// binaries' paths in the same order.
func buildPackages(ctx context.Context, dir string, packages ...string) ([]string, error) {
	return buildPackagesEnv(ctx, dir, nil, packages...)
}

// buildPackagesEnv is buildPackages with env added to the go command's environment.
func buildPackagesEnv(ctx context.Context, dir string, env []string, packages ...string) ([]string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the build directory: %w", err)
	}
	var paths []string
	for _, pkg := range packages {
		paths = append(paths, filepath.Join(dir, path.Base(pkg)))
	}
	// A trailing slash makes -o a directory, for one package as for several.
	out := dir + string(filepath.Separator)
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out}, packages...)...)
	cmd.Dir = root
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	// The compiler and linker are children of go: stop them too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("building %s: %w", strings.Join(packages, " "), ctx.Err())
		}
		return nil, fmt.Errorf("building %s: %w\n%s", strings.Join(packages, " "), err, stderr.String())
	}
	return paths, nil
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
