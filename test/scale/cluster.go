package scale

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/manifests"
)

// cluster is one control plane, with or without nodeguard in its chains.
type cluster struct {
	cp *controlplane.ControlPlane
	// env is nil when nodeguard is not installed.
	env       *framework.Env
	admin     kubernetes.Interface
	adminHTTP *http.Client
}

// startCluster starts a control plane in dir for mode. With nodeguard, it
// is test/e2e/framework's environment as installed: the shipped chains
// (in mode min-version the opt-in authorization configuration instead),
// the shipped NodeguardPolicy and Rego policies, and the Deployment's
// flags. Without (mode none), the shipped authorization chain loses
// nodeguard's entry and no ValidatingWebhookConfiguration is applied.
// components are kustomize Components installed with nodeguard.
func startCluster(ctx context.Context, dir string, mode Mode, components ...string) (_ *cluster, err error) {
	c := &cluster{}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if mode != ModeNone {
		settings, args, err := shippedWebhookSettings()
		if err != nil {
			return nil, err
		}
		rego, err := framework.ShippedPolicyFiles()
		if err != nil {
			return nil, err
		}
		c.env, err = framework.Start(ctx, framework.Options{
			WorkDir: dir, Settings: settings, PolicyFiles: rego, WebhookArgs: args,
			AuthorizeEveryNodeRequest: mode == ModeMinVersion, Components: components,
		})
		if err != nil {
			return nil, fmt.Errorf("starting the environment with nodeguard: %w", err)
		}
		c.cp = c.env.CP
	} else {
		authz, err := writeChainWithoutNodeguard(dir)
		if err != nil {
			return nil, err
		}
		c.cp, err = controlplane.Start(ctx, controlplane.Options{
			WorkDir:                 filepath.Join(dir, "controlplane"),
			AuthorizationConfigFile: authz,
			// As framework.Start does: the documented configuration.
			EnableAdmissionPlugins: []string{"NodeRestriction"},
		})
		if err != nil {
			return nil, fmt.Errorf("starting the control plane without nodeguard: %w", err)
		}
	}
	adminConfig := c.cp.AdminConfig()
	// nodeguard warns that the harness's ConfigMap is mutable, once per
	// assigned node: true, and noise here.
	adminConfig.WarningHandler = rest.NoWarnings{}
	if c.admin, err = kubernetes.NewForConfig(adminConfig); err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if c.adminHTTP, err = rest.HTTPClientFor(c.cp.AdminConfig()); err != nil {
		return nil, fmt.Errorf("admin HTTP client: %w", err)
	}
	return c, nil
}

func (c *cluster) stop() {
	if c.env != nil {
		c.env.Stop()
	} else if c.cp != nil {
		_ = c.cp.Stop()
	}
}

// writeChainWithoutNodeguard writes the shipped AuthorizationConfiguration
// without nodeguard's entry, so that mode none keeps whatever else the
// shipped chain holds (today Node, then RBAC).
func writeChainWithoutNodeguard(dir string) (string, error) {
	config, err := controlplane.LoadAuthorizationConfig()
	if err != nil {
		return "", err
	}
	kept := config.Authorizers[:0]
	for _, a := range config.Authorizers {
		if a.Name != controlplane.WebhookAuthorizerName {
			kept = append(kept, a)
		}
	}
	if len(kept) == len(config.Authorizers) {
		return "", fmt.Errorf("%s has no authorizer named %s", controlplane.AuthorizationConfigManifest, controlplane.WebhookAuthorizerName)
	}
	config.Authorizers = kept
	config.APIVersion = apiserverv1.SchemeGroupVersion.String()
	config.Kind = "AuthorizationConfiguration"
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("encoding the authorization chain without nodeguard: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	path := filepath.Join(dir, "authorization-config-without-nodeguard.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("writing the authorization chain without nodeguard: %w", err)
	}
	return path, nil
}

// deploymentArgsLeftOut are the webhook Deployment's flags that name files,
// ports or shutdown timing inside the pod; test/e2e/framework sets its own.
var deploymentArgsLeftOut = []string{
	"--secure-port", "--bind-address", "--tls-", "--client-ca-file", "--settings",
	"--kubeconfig", "--shutdown-", "-v", "--v",
}

// shippedWebhookSettings renders manifests/base and returns the
// NodeguardPolicy of the nodeguard-policy ConfigMap and the webhook
// container's tuning flags (in-flight limits, queueing, graph staleness).
func shippedWebhookSettings() (settings string, args []string, err error) {
	base, err := manifests.Dir("base")
	if err != nil {
		return "", nil, err
	}
	objs, err := manifests.Render(base)
	if err != nil {
		return "", nil, err
	}
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "ConfigMap" && obj.GetName() == "nodeguard-policy":
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			if len(data) != 1 {
				return "", nil, fmt.Errorf("ConfigMap nodeguard-policy has %d keys, want 1", len(data))
			}
			for _, v := range data {
				settings = v
			}
		case obj.GetKind() == "Deployment" && obj.GetName() == "nodeguard-webhook":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				container, _ := c.(map[string]any)
				if container["name"] != "webhook" {
					continue
				}
				list, _, _ := unstructured.NestedStringSlice(container, "args")
				for _, arg := range list {
					if !leftOut(arg) {
						args = append(args, arg)
					}
				}
			}
		}
	}
	if settings == "" {
		return "", nil, errors.New("manifests/base renders no nodeguard-policy ConfigMap")
	}
	return settings, args, nil
}

func leftOut(arg string) bool {
	for _, prefix := range deploymentArgsLeftOut {
		if arg == prefix || strings.HasPrefix(arg, prefix+"=") || (strings.HasSuffix(prefix, "-") && strings.HasPrefix(arg, prefix)) {
			return true
		}
	}
	return false
}
