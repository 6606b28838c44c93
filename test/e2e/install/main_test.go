package install

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	env      *framework.Env
	binaries framework.NodeBinaries
	// built is what the build produced.
	built builtImages
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, "install", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if built, err = buildImages(ctx, filepath.Join(dir, "images")); err != nil {
			return nil, err
		}
		if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
			return nil, err
		}
		env, err = framework.Start(ctx, framework.Options{
			WorkDir:           filepath.Join(dir, "env"),
			ControllerManager: true,
			Scheduler:         true,
			Components:        []string{built.component},
		})
		return []*framework.Env{env}, err
	}))
}
