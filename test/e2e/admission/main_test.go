// Package admission_test proves /validate against a real kube-apiserver with
// the shipped ValidatingWebhookConfiguration and admission configuration,
// using node and admin client certificates.
package admission_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const basePolicy = `apiVersion: config.nodeguard.dev/v1alpha1
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var envs []*framework.Env
	defer func() {
		for _, e := range envs {
			e.Stop()
		}
	}()
	for _, without := range []bool{false, true} {
		dir, err := os.MkdirTemp("", "nodeguard-e2e-admission-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		e, err := framework.Start(ctx, framework.Options{WorkDir: dir, Policy: basePolicy, WithoutNodeRestriction: without})
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting environment:", err)
			return 1
		}
		envs = append(envs, e)
	}
	env, bare = envs[0], envs[1]
	code := m.Run()
	if code != 0 {
		for _, e := range envs {
			fmt.Fprintf(os.Stderr, "webhook log tail:\n%s\n", e.WebhookLogTail(40))
		}
	}
	return code
}
