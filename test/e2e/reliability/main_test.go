package reliability_test

import (
	"context"
	"os"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// minKubeletVersion is the webhook's minimum; the traffic's node is above it.
const minKubeletVersion = "1.30.0"

var env *framework.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return framework.RunSuite(m, "reliability", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		env, err = framework.Start(ctx, framework.Options{
			WorkDir:     dir,
			WebhookArgs: []string{"--min-kubelet-version=" + minKubeletVersion},
		})
		return []*framework.Env{env}, err
	})
}

// soak reports whether the long variants run (NODEGUARD_SOAK=1).
func soak() bool { return os.Getenv("NODEGUARD_SOAK") == "1" }
