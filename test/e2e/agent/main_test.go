// Package agent_test runs the node agent (cmd/agent, as its own process with
// a node client certificate) against a real kube-apiserver and etcd whose
// authorization chain includes the nodeguard webhook (test/e2e/framework),
// with real kubelets (fake CRI) run by test/kubeletunit as systemd would.
package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	env *framework.Env
	// binaries are the agent and its helpers, built once for all tests.
	binaries framework.NodeBinaries
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return framework.RunSuite(m, "agent", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
			return nil, err
		}
		env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env")})
		return []*framework.Env{env}, err
	})
}
