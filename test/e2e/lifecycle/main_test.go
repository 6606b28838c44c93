package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	// env runs kube-controller-manager beside the apiserver; no scheduler,
	// since nothing here needs pods placed.
	env *framework.Env
	// binaries are the node's programs, built once for all tests.
	binaries framework.NodeBinaries
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return framework.RunSuite(m, "lifecycle", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
			return nil, err
		}
		env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env"), ControllerManager: true})
		return []*framework.Env{env}, err
	})
}
