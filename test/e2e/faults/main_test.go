// Package faults_test proves that the webhook stays correct when its feed
// from the apiserver breaks: its watches are cut by a proxy, or the
// apiserver restarts, while traffic runs; and that it holds steady under a
// soak of mixed traffic and cluster churn (soak_test.go).
package faults_test

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// staleAfter is the webhook's --graph-stale-after: short, so that a cut
// makes the graph stale within a test's patience.
const staleAfter = 3 * time.Second

var (
	env *framework.Env
	// admin is env's admin without the admission warnings printed (the
	// churn's nodes report no kubelet version, and each assignment warns).
	admin kubernetes.Interface
	// proxy stands between the webhook and the apiserver; the apiserver's
	// own clients (admin, nodes) reach it directly.
	proxy *framework.Proxy
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer func() {
		if proxy != nil {
			_ = proxy.Close()
		}
	}()
	return framework.RunSuite(m, "faults", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		env, err = framework.Start(ctx, framework.Options{
			WorkDir:             dir,
			WebhookArgs:         []string{"--graph-stale-after=" + staleAfter.String()},
			APIServerForWebhook: framework.ProxyAPIServer(func(p *framework.Proxy) { proxy = p }),
		})
		if err != nil {
			return []*framework.Env{env}, err
		}
		cfg := env.CP.AdminConfig()
		cfg.WarningHandler = rest.NoWarnings{}
		admin, err = kubernetes.NewForConfig(cfg)
		return []*framework.Env{env}, err
	})
}
