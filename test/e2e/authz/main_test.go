// Package authz_test proves /authorize against a real kube-apiserver whose
// authorization chain is the shipped AuthorizationConfiguration, with node
// client certificates.
package authz_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

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
	dir, err := os.MkdirTemp("", "nodeguard-e2e-authz-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err = framework.Start(ctx, framework.Options{
		WorkDir:     dir,
		WebhookArgs: []string{"--min-kubelet-version=" + minKubeletVersion},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting environment:", err)
		return 1
	}
	defer env.Stop()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "webhook log tail:\n%s\n\ncontrol plane log tail:\n%s\n", env.WebhookLogTail(60), env.CP.LogTail(40))
	}
	return code
}
