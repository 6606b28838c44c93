// Package policy_test proves the Rego policies end to end: a real
// kube-apiserver whose admission and authorization webhooks are nodeguard's,
// with the webhook serving a copy of the shipped policies from --policy-dir
// and configured through --policy-data. It shows shipped policies refusing
// what the built-in rules allow, on both endpoints, and a policy directory
// changed on disk, fixed and broken, under a running webhook.
package policy_test

import (
	"context"
	"os"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// configNamespace is where this suite keeps kubelet configurations: the
// webhook's --policy-data allows it alone. kube-system and nodeguard may not
// be allowed: the admission webhook does not judge them.
const configNamespace = "e2e-policy-configs"

const policyData = "allowed_namespaces: [" + configNamespace + "]\n"

var (
	env *framework.Env
	// shipped are the shipped policy files, as the suite started them.
	shipped map[string]string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return framework.RunSuite(m, "policy", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if shipped, err = framework.ShippedPolicyFiles(); err != nil {
			return nil, err
		}
		env, err = framework.Start(ctx, framework.Options{
			WorkDir:     dir,
			PolicyFiles: shipped,
			PolicyData:  policyData,
			WebhookArgs: []string{"--decision-log=denials"},
		})
		return []*framework.Env{env}, err
	})
}
