// Package authz_test proves /authorize against a real kube-apiserver whose
// authorization chain is the shipped AuthorizationConfiguration, with node
// client certificates.
package authz_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// minKubeletVersion is the webhook's minimum; nodes report versions on both
// sides of it.
const minKubeletVersion = "1.30.0"

var (
	// env has the shipped authorization configuration: only nodes'
	// ConfigMap requests reach the webhook.
	env *framework.Env
	// everyRequest has the opt-in one for a minimum kubelet version, which
	// sends every request of a node to the webhook.
	everyRequest *framework.Env
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return framework.RunSuite(m, "authz", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		env, err = framework.Start(ctx, framework.Options{
			WorkDir:     filepath.Join(dir, "shipped"),
			WebhookArgs: []string{"--min-kubelet-version=" + minKubeletVersion},
		})
		if err != nil {
			return nil, err
		}
		everyRequest, err = framework.Start(ctx, framework.Options{
			WorkDir:                   filepath.Join(dir, "every-request"),
			WebhookArgs:               []string{"--min-kubelet-version=" + minKubeletVersion},
			AuthorizeEveryNodeRequest: true,
		})
		if err != nil {
			return []*framework.Env{env}, err
		}
		return []*framework.Env{env, everyRequest}, nil
	})
}
