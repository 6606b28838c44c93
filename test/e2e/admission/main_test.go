// Package admission_test proves /validate against a real kube-apiserver with
// the shipped ValidatingWebhookConfiguration and admission configuration,
// using node and admin client certificates.
package admission_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// baseSettings is the suite's NodeguardPolicy.
const baseSettings = `apiVersion: config.nodeguard.dev/v1alpha1
kind: NodeguardPolicy
minKubeletVersion: "1.30.0"
forbiddenDynamicFields: [staticPodPath]
`

var (
	// env runs the in-tree NodeRestriction plugin as any real cluster
	// does; bare runs without it, so nodeguard's rules answer alone.
	env, bare *framework.Env
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return framework.RunSuite(m, "admission", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var envs []*framework.Env
		for _, without := range []bool{false, true} {
			e, err := framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, fmt.Sprint(len(envs))), Settings: baseSettings, WithoutNodeRestriction: without})
			if err != nil {
				return envs, err
			}
			envs = append(envs, e)
		}
		env, bare = envs[0], envs[1]
		return envs, nil
	})
}
