// Package agent_test runs the node agent (cmd/agent, as its own process with
// a node client certificate) against a real kube-apiserver and etcd whose
// authorization chain includes the nodeguard webhook (test/e2e/framework),
// with test/kubeletstub standing in for the kubelet.
package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	env *framework.Env
	// agentBinary and stubBinary are built once for all tests.
	agentBinary, stubBinary string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodeguard-e2e-agent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if agentBinary, err = framework.BuildCommand(dir, "agent"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if stubBinary, err = buildStub(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting environment:", err)
		return 1
	}
	defer env.Stop()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "webhook log tail:\n%s\n\ncontrol plane log tail:\n%s\n", env.WebhookLogTail(40), env.CP.LogTail(30))
	}
	return code
}

func buildStub(dir string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "kubeletstub")
	cmd := exec.Command("go", "build", "-o", out, "./test/kubeletstub")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building test/kubeletstub: %w\n%s", err, output)
	}
	return out, nil
}
