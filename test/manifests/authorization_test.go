package manifests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	apiserverconfig "k8s.io/apiserver/pkg/apis/apiserver"
	apiserverinstall "k8s.io/apiserver/pkg/apis/apiserver/install"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"

	"github.com/nodeguard/nodeguard/pkg/certs"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

// TestShippedAuthorizationFilesValidate fills in the shipped kubeconfig
// template and validates the shipped AuthorizationConfiguration against it,
// as kube-apiserver does when it loads --authorization-config (the same
// path the e2e tests start kube-apiserver with).
func TestShippedAuthorizationFilesValidate(t *testing.T) {
	ca, err := certs.NewCA("serving-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controlplane.WriteAuthorizationFiles(t.TempDir(), controlplane.WebhookKubeconfig{
		Server:   "https://nodeguard-webhook.nodeguard.svc:443/authorize",
		CABundle: ca.CertPEM(),
	}); err != nil {
		t.Fatal(err)
	}
}

// authzCheck is a property of the shipped AuthorizationConfiguration with the
// ways to break it; like TestInvariants, each break must make it fail.
type authzCheck struct {
	name   string
	check  func(*apiserverv1.AuthorizationConfiguration) error
	breaks map[string]func(*apiserverv1.AuthorizationConfiguration)
}

func TestAuthorizationConfiguration(t *testing.T) {
	shipped, err := controlplane.LoadAuthorizationConfig()
	if err != nil {
		t.Fatal(err)
	}
	// Validation reads the webhook's kubeconfig; any existing file will do
	// for the checks here, the shipped template is checked above.
	kubeconfig := filepath.Join(t.TempDir(), "authorization-webhook.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checks := []authzCheck{
		{
			name:  "validates as kube-apiserver validates it",
			check: func(c *apiserverv1.AuthorizationConfiguration) error { return validateAuthorization(c, kubeconfig) },
			breaks: map[string]func(*apiserverv1.AuthorizationConfiguration){
				"a matchCondition that does not compile": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.MatchConditions[0].Expression = "'system:nodes' in request.groupz"
				},
				"Node under another name": func(c *apiserverv1.AuthorizationConfiguration) { c.Authorizers[1].Name = "kubelets" },
				"an unknown authorizer":   func(c *apiserverv1.AuthorizationConfiguration) { c.Authorizers[2].Type = "Magic" },
				"a timeout over 30s": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.Timeout = metav1.Duration{Duration: time.Minute}
				},
			},
		},
		{
			name:  "nodeguard first, then Node, then RBAC",
			check: checkAuthorizerOrder,
			breaks: map[string]func(*apiserverv1.AuthorizationConfiguration){
				"after Node": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0], c.Authorizers[1] = c.Authorizers[1], c.Authorizers[0]
				},
				"without RBAC": func(c *apiserverv1.AuthorizationConfiguration) { c.Authorizers = c.Authorizers[:2] },
			},
		},
		{
			name:  "an outage of the webhook is no opinion",
			check: checkNoOpinionOnFailure,
			breaks: map[string]func(*apiserverv1.AuthorizationConfiguration){
				"Deny": func(c *apiserverv1.AuthorizationConfiguration) { c.Authorizers[0].Webhook.FailurePolicy = "Deny" },
			},
		},
		{
			name:  "only nodes' requests reach the webhook",
			check: checkAuthorizationMatchConditions,
			breaks: map[string]func(*apiserverv1.AuthorizationConfiguration){
				"no matchConditions": func(c *apiserverv1.AuthorizationConfiguration) { c.Authorizers[0].Webhook.MatchConditions = nil },
				"everyone's requests": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.MatchConditions[0].Expression = "true"
				},
				"by user name only": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.MatchConditions[0].Expression = "request.user.startsWith('system:node:')"
				},
				"every request of a node": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.MatchConditions = c.Authorizers[0].Webhook.MatchConditions[:1]
				},
				"ConfigMaps only, the agent's own configz left out": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.MatchConditions[1].Expression = "has(request.resourceAttributes) && request.resourceAttributes.resource == 'configmaps' && request.resourceAttributes.?group.orValue('') == ''"
				},
				"any Node's configz": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.MatchConditions[1].Expression = "has(request.resourceAttributes) && request.resourceAttributes.?group.orValue('') == '' && request.resourceAttributes.resource in ['configmaps', 'nodes']"
				},
			},
		},
		{
			name:  "cached answers and waits are short",
			check: checkAuthorizationTimes,
			breaks: map[string]func(*apiserverv1.AuthorizationConfiguration){
				"allowed cached for the default 5m": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.AuthorizedTTL = metav1.Duration{Duration: 5 * time.Minute}
				},
				"denied cached for 0s, the default 30s": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.UnauthorizedTTL = metav1.Duration{}
				},
				"refusals cached": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.CacheUnauthorizedRequests = nil
				},
				"a 10s timeout": func(c *apiserverv1.AuthorizationConfiguration) {
					c.Authorizers[0].Webhook.Timeout = metav1.Duration{Duration: 10 * time.Second}
				},
			},
		},
	}
	for _, tt := range checks {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check(shipped.DeepCopy()); err != nil {
				t.Fatalf("%s: %v", controlplane.AuthorizationConfigManifest, err)
			}
			if len(tt.breaks) == 0 {
				t.Fatal("a check without a way to break it proves nothing")
			}
			for name, breakIt := range tt.breaks {
				broken := shipped.DeepCopy()
				breakIt(broken)
				if err := tt.check(broken); err == nil {
					t.Errorf("broken (%s), yet the check passes", name)
				} else {
					t.Logf("broken (%s): %v", name, err)
				}
			}
		})
	}
}

func nodeguardAuthorizer(c *apiserverv1.AuthorizationConfiguration) (*apiserverv1.WebhookConfiguration, error) {
	for _, a := range c.Authorizers {
		if a.Name == controlplane.WebhookAuthorizerName && a.Type == string(apiserverv1.TypeWebhook) && a.Webhook != nil {
			return a.Webhook, nil
		}
	}
	return nil, fmt.Errorf("no webhook authorizer named %s", controlplane.WebhookAuthorizerName)
}

// validateAuthorization runs the validation kube-apiserver runs on the file,
// with the webhook's kubeconfig at kubeconfig.
func validateAuthorization(c *apiserverv1.AuthorizationConfiguration, kubeconfig string) error {
	webhook, err := nodeguardAuthorizer(c)
	if err != nil {
		return err
	}
	webhook.ConnectionInfo.KubeConfigFile = &kubeconfig
	scheme := runtime.NewScheme()
	apiserverinstall.Install(scheme)
	internal := &apiserverconfig.AuthorizationConfiguration{}
	if err := scheme.Convert(c, internal, nil); err != nil {
		return fmt.Errorf("converting: %w", err)
	}
	knownTypes := sets.New("AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node")
	errs := apiservervalidation.ValidateAuthorizationConfiguration(authorizationcel.NewDefaultCompiler(), nil, internal, knownTypes, sets.New("Webhook"))
	if err := errs.ToAggregate(); err != nil {
		return err
	}
	// kube-apiserver also insists that in-tree authorizers carry their type's name.
	for _, a := range c.Authorizers {
		if a.Type != string(apiserverv1.TypeWebhook) && a.Name != strings.ToLower(a.Type) {
			return fmt.Errorf("authorizer of type %s is named %q, want %q", a.Type, a.Name, strings.ToLower(a.Type))
		}
	}
	return nil
}

// checkAuthorizerOrder: nodeguard must come before Node to be able to deny
// too-old kubelets (the first Allow or Deny ends the chain), and Node and
// RBAC must still follow, since the file replaces --authorization-mode.
func checkAuthorizerOrder(c *apiserverv1.AuthorizationConfiguration) error {
	var order []string
	for _, a := range c.Authorizers {
		order = append(order, a.Type+"/"+a.Name)
	}
	want := []string{"Webhook/" + controlplane.WebhookAuthorizerName, "Node/node", "RBAC/rbac"}
	if len(order) < len(want) || strings.Join(order[:len(want)], ",") != strings.Join(want, ",") {
		return fmt.Errorf("authorizers %v: want %v first", order, want)
	}
	return nil
}

func checkNoOpinionOnFailure(c *apiserverv1.AuthorizationConfiguration) error {
	webhook, err := nodeguardAuthorizer(c)
	if err != nil {
		return err
	}
	if webhook.FailurePolicy != apiserverv1.FailurePolicyNoOpinion {
		return fmt.Errorf("failurePolicy %q: want NoOpinion, or an outage of the webhook denies every node everything", webhook.FailurePolicy)
	}
	return nil
}

// checkAuthorizationMatchConditions evaluates the matchConditions as the
// apiserver does: a node's ConfigMap requests reach the webhook, and
// nothing else: no other request of a node, nobody else's.
func checkAuthorizationMatchConditions(c *apiserverv1.AuthorizationConfiguration) error {
	return checkMatches(c, false)
}

// checkEveryNodeRequestMatches is the same for the opt-in configuration
// of a minimum kubelet version: every request of a node, nobody else's.
func checkEveryNodeRequestMatches(c *apiserverv1.AuthorizationConfiguration) error {
	return checkMatches(c, true)
}

func checkMatches(c *apiserverv1.AuthorizationConfiguration, everyNodeRequest bool) error {
	webhook, err := nodeguardAuthorizer(c)
	if err != nil {
		return err
	}
	if len(webhook.MatchConditions) == 0 {
		return errors.New("no matchConditions: every request in the cluster would wait on the webhook")
	}
	conditions := make([]apiserverconfig.WebhookMatchCondition, len(webhook.MatchConditions))
	for i, mc := range webhook.MatchConditions {
		conditions[i] = apiserverconfig.WebhookMatchCondition{Expression: mc.Expression}
	}
	matcher, errs := apiservervalidation.ValidateAndCompileMatchConditions(authorizationcel.NewDefaultCompiler(), conditions)
	if err := errs.ToAggregate(); err != nil {
		return err
	}
	node := []string{"system:nodes", "system:authenticated"}
	configMap := &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: "kube-system", Name: "x"}
	var all []error
	for _, tt := range []struct {
		what     string
		user     string
		groups   []string
		resource *authorizationv1.ResourceAttributes
		path     string
		want     bool
		// everyNodeRequest is the answer of the opt-in configuration.
		everyNodeRequest bool
	}{
		{"a node reads a ConfigMap", "system:node:node-a", node, configMap, "", true, true},
		{"a node watches a ConfigMap by name", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "watch", Resource: "configmaps", Namespace: "ns", Name: "x"}, "", true, true},
		{"a node renews its Lease", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "node-a"}, "", false, true},
		{"a node patches its status", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status", Name: "node-a"}, "", false, true},
		{"a node reads a Secret", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"}, "", false, true},
		{"a node reads configmaps of another group", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "get", Group: "example.com", Resource: "configmaps", Namespace: "ns", Name: "x"}, "", false, true},
		{"a node asks a non-resource path", "system:node:node-a", node, nil, "/healthz", false, true},
		{"a node's agent reads its own kubelet's /configz", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "configz", Name: "node-a"}, "", true, true},
		{"a node asks for another Node's configz", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "configz", Name: "node-b"}, "", false, true},
		{"a node asks for its own Node's proxy", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "node-a"}, "", false, true},
		{"a node writes its own configz", "system:node:node-a", node,
			&authorizationv1.ResourceAttributes{Verb: "update", Resource: "nodes", Subresource: "configz", Name: "node-a"}, "", false, true},
		{"an administrator reads a Node's configz", "admin", []string{"system:masters", "system:authenticated"},
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "configz", Name: "node-a"}, "", false, false},
		{"a system:node: user outside system:nodes", "system:node:node-a", []string{"system:authenticated"}, configMap, "", false, false},
		{"an administrator", "admin", []string{"system:masters", "system:authenticated"}, configMap, "", false, false},
		{"a service account", "system:serviceaccount:kube-system:default", []string{"system:serviceaccounts", "system:authenticated"}, configMap, "", false, false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: tt.user, Groups: tt.groups, ResourceAttributes: tt.resource,
		}}
		if tt.path != "" {
			sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Verb: "get", Path: tt.path}
		}
		want := tt.want
		if everyNodeRequest {
			want = tt.everyNodeRequest
		}
		got, err := matcher.Eval(context.Background(), sar)
		if err != nil {
			all = append(all, fmt.Errorf("%s: %w", tt.what, err))
			continue
		}
		if got != want {
			all = append(all, fmt.Errorf("%s: reaches the webhook %v, want %v", tt.what, got, want))
		}
	}
	return errors.Join(all...)
}

// checkAuthorizationTimes: revoking an assignment takes up to authorizedTTL
// to reach a node, and every node request may wait the timeout. The
// apiserver's defaults (5m, 30s) are too long for that. Refusals are not
// cached at all (unauthorizedTTL is required all the same).
func checkAuthorizationTimes(c *apiserverv1.AuthorizationConfiguration) error {
	webhook, err := nodeguardAuthorizer(c)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range []struct {
		name     string
		value    time.Duration
		min, max time.Duration
	}{
		{"authorizedTTL", webhook.AuthorizedTTL.Duration, time.Second, 30 * time.Second},
		{"unauthorizedTTL", webhook.UnauthorizedTTL.Duration, time.Second, 30 * time.Second},
		{"timeout", webhook.Timeout.Duration, time.Second, 5 * time.Second},
	} {
		if d.value < d.min || d.value > d.max {
			errs = append(errs, fmt.Errorf("%s %v: want %v to %v", d.name, d.value, d.min, d.max))
		}
	}
	// The graph lags the apiserver; a cached "no opinion" from just before it
	// caught up would refuse an agent's retries (e2e TestReadRightAfterAssignment).
	if webhook.CacheUnauthorizedRequests == nil || *webhook.CacheUnauthorizedRequests {
		errs = append(errs, errors.New("cacheUnauthorizedRequests: want false, so that a refusal from a graph that lags an assignment is not served again"))
	}
	return errors.Join(errs...)
}

// TestMinKubeletVersionAuthorization: the opt-in configuration for a
// minimum kubelet version sends every request of a node to the webhook, and
// differs from the shipped one in nothing else.
func TestMinKubeletVersionAuthorization(t *testing.T) {
	shipped, err := controlplane.LoadAuthorizationConfig()
	if err != nil {
		t.Fatal(err)
	}
	optIn, err := controlplane.LoadAuthorizationConfigFrom(controlplane.MinKubeletVersionAuthorizationConfigManifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkEveryNodeRequestMatches(optIn); err != nil {
		t.Errorf("%s: %v", controlplane.MinKubeletVersionAuthorizationConfigManifest, err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "authorization-webhook.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := validateAuthorization(optIn.DeepCopy(), kubeconfig); err != nil {
		t.Errorf("%s: %v", controlplane.MinKubeletVersionAuthorizationConfigManifest, err)
	}
	for _, c := range []*apiserverv1.AuthorizationConfiguration{shipped, optIn} {
		webhook, err := nodeguardAuthorizer(c)
		if err != nil {
			t.Fatal(err)
		}
		webhook.MatchConditions = nil
	}
	if !equality.Semantic.DeepEqual(shipped, optIn) {
		t.Errorf("%s differs from %s in more than its matchConditions", controlplane.MinKubeletVersionAuthorizationConfigManifest, controlplane.AuthorizationConfigManifest)
	}
}
