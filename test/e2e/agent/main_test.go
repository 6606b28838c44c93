// Package agent_test runs the node agent (cmd/agent, as its own process with
// a node client certificate) against a real kube-apiserver and etcd whose
// authorization chain includes the nodeguard webhook (test/e2e/framework),
// with test/kubeletstub standing in for the kubelet.
package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	env *framework.Env
	// binaries are the agent and the kubelet stub, built once for all tests.
	binaries framework.NodeBinaries
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
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
