// Package cli_test runs the kubectl plugin (pkg/cli, in-process through
// cli.Run, and once as the built binary) against a real kube-apiserver and
// etcd with the nodeguard webhook in its admission and authorization chains
// (test/e2e/framework), as an administrator with a kubeconfig would.
package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/nodeguard/nodeguard/pkg/cli"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	env *framework.Env
	// kubeconfig holds the administrator's credentials; pluginBinary is
	// cmd/kubectl-nodeguard, built once.
	kubeconfig, pluginBinary string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return framework.RunSuite(m, "cli", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if pluginBinary, err = framework.BuildCommand(dir, "kubectl-nodeguard"); err != nil {
			return nil, err
		}
		if env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env")}); err != nil {
			return []*framework.Env{env}, err
		}
		kubeconfig = filepath.Join(dir, "admin.kubeconfig")
		return []*framework.Env{env}, controlplane.WriteKubeconfig(kubeconfig, env.CP.AdminConfig())
	})
}

type result struct {
	code        int
	out, errOut string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.out, r.errOut)
}

// plugin runs the plugin in-process as the administrator.
func plugin(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	code := cli.Run(t.Context(), append([]string{"--kubeconfig", kubeconfig}, args...), streams)
	return result{code: code, out: out.String(), errOut: errOut.String()}
}
