// Package authz_test proves /authorize against a real kube-apiserver whose
// authorization chain is the shipped AuthorizationConfiguration, with node
// client certificates.
package authz_test

import (
	"context"
	"os"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// minKubeletVersion is the webhook's minimum; nodes report versions on both
// sides of it.
const minKubeletVersion = "1.30.0"

var env *framework.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return framework.RunSuite(m, "authz", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		env, err = framework.Start(ctx, framework.Options{
			WorkDir:     dir,
			WebhookArgs: []string{"--min-kubelet-version=" + minKubeletVersion},
		})
		return []*framework.Env{env}, err
	})
}
