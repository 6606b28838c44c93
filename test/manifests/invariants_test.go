package manifests

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodeguard/nodeguard/pkg/certs"
)

// An invariant is a property of the rendered manifests. Each comes with ways
// to break it, applied to a copy of the rendering: the check must pass on
// what ships and fail on every broken copy, so that no check passes
// vacuously.
type invariant struct {
	name string
	// only lists the renderings the invariant applies to; nil means all.
	only   []string
	check  func(*testing.T, objects) error
	breaks []breakage
}

type breakage struct {
	name  string
	apply func(*testing.T, objects)
	// add, when set, is appended to the rendering before apply runs.
	add *unstructured.Unstructured
}

// plain adapts a check that needs no *testing.T.
func plain(check func(objects) error) func(*testing.T, objects) error {
	return func(_ *testing.T, o objects) error { return check(o) }
}

func TestInvariants(t *testing.T) {
	rendered := map[string]objects{}
	for _, name := range renderingNames {
		rendered[name] = render(t, name)
	}
	for _, inv := range invariants(t) {
		for _, renderingName := range renderingNames {
			if inv.only != nil && !slices.Contains(inv.only, renderingName) {
				continue
			}
			t.Run(inv.name+"/"+renderingName, func(t *testing.T) {
				shipped := rendered[renderingName]
				if err := inv.check(t, shipped); err != nil {
					t.Fatalf("manifests/%s: %v", renderingName, err)
				}
				if len(inv.breaks) == 0 {
					t.Fatal("an invariant without a way to break it proves nothing")
				}
				for _, b := range inv.breaks {
					broken := shipped.deepCopy()
					if b.add != nil {
						broken = append(broken, b.add.DeepCopy())
					}
					if b.apply != nil {
						b.apply(t, broken)
					}
					err := inv.check(t, broken)
					if err == nil {
						t.Errorf("broken (%s), yet the check passes", b.name)
						continue
					}
					t.Logf("broken (%s): %v", b.name, err)
				}
				if err := inv.check(t, shipped); err != nil {
					t.Fatalf("a breakage changed the shipped rendering: %v", err)
				}
			})
		}
	}
}

func editVWC(t *testing.T, o objects, mutate func(*admissionregistrationv1.ValidatingWebhookConfiguration)) {
	t.Helper()
	edit(t, o, "ValidatingWebhookConfiguration", vwcName, mutate)
}

// editWebhook edits the webhook of the configuration whose name starts with prefix.
func editWebhook(t *testing.T, o objects, prefix string, mutate func(*admissionregistrationv1.ValidatingWebhook)) {
	t.Helper()
	found := false
	editVWC(t, o, func(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
		for i := range cfg.Webhooks {
			if strings.HasPrefix(cfg.Webhooks[i].Name, prefix) {
				mutate(&cfg.Webhooks[i])
				found = true
			}
		}
	})
	if !found {
		t.Fatalf("no webhook named %s*", prefix)
	}
}

func editDeployment(t *testing.T, o objects, mutate func(*appsv1.Deployment, *corev1.Container)) {
	t.Helper()
	edit(t, o, "Deployment", webhookName, func(d *appsv1.Deployment) {
		mutate(d, container(&d.Spec.Template.Spec, webhookContainer))
	})
}

func editAgent(t *testing.T, o objects, mutate func(*appsv1.DaemonSet, *corev1.Container)) {
	t.Helper()
	edit(t, o, "DaemonSet", agentName, func(d *appsv1.DaemonSet) {
		mutate(d, container(&d.Spec.Template.Spec, agentContainer))
	})
}

// setArg replaces --flag=... or appends it.
func setArg(c *corev1.Container, flag, value string) {
	arg := "--" + flag + "=" + value
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--"+flag+"=") {
			c.Args[i] = arg
			return
		}
	}
	c.Args = append(c.Args, arg)
}

func setNested(t *testing.T, o objects, kind, name string, value any, fields ...string) {
	t.Helper()
	obj, err := o.get(kind, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(obj.Object, value, fields...); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func invariants(t *testing.T) []invariant {
	otherCA, err := certs.NewCA("not-the-serving-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCAKey, err := otherCA.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	all := admissionInvariants()
	all = append(all, workloadInvariants()...)
	all = append(all, rolloutControllerInvariants()...)
	all = append(all, podSecurityInvariants()...)
	return append(all, certificateInvariants(otherCA, otherCAKey)...)
}

// admissionInvariants are about the ValidatingWebhookConfiguration.
func admissionInvariants() []invariant {
	return []invariant{
		{
			name:  "admission webhooks exempt nodeguard and kube-system",
			check: plain(checkNamespaceExemptions),
			breaks: []breakage{
				{name: "kube-system judged", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.NamespaceSelector.MatchExpressions[0].Values = []string{namespace}
					})
				}},
				{name: "no namespaceSelector", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) { h.NamespaceSelector = nil })
				}},
				{name: "selector matching no namespace", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.NamespaceSelector.MatchLabels = map[string]string{"nobody": "has-this"}
					})
				}},
			},
		},
		{
			name:  "nodes/status is listed beside nodes",
			check: plain(checkNodeStatusBesideNodes),
			breaks: []breakage{
				{name: "nodes/status dropped", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.Rules[0].Resources = []string{nodesResource} })
				}},
			},
		},
		{
			name:  "webhook timeouts are at most 5s",
			check: plain(checkTimeouts),
			breaks: []breakage{
				{name: "10s", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = ptr[int32](10) })
				}},
				{name: "unset (10s)", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = nil })
				}},
			},
		},
		{
			name:  "webhooks have no side effects",
			check: plain(checkSideEffectsNone),
			breaks: []breakage{
				{name: "Some", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.SideEffects = ptr(admissionregistrationv1.SideEffectClassSome)
					})
				}},
				{name: "NoneOnDryRun", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.SideEffects = ptr(admissionregistrationv1.SideEffectClassNoneOnDryRun)
					})
				}},
			},
		},
		{
			name:  "admissionReviewVersions is [v1]",
			check: plain(checkReviewVersions),
			breaks: []breakage{
				{name: "v1beta1 too", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.AdmissionReviewVersions = []string{"v1", "v1beta1"}
					})
				}},
			},
		},
		{
			name:  "admission fails closed",
			check: plain(checkFailClosed),
			breaks: []breakage{
				{name: "Ignore", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.FailurePolicy = ptr(admissionregistrationv1.Ignore)
					})
				}},
			},
		},
		{
			name:  "webhooks call /validate through the Service",
			check: plain(checkClientConfig),
			breaks: []breakage{
				{name: "the container's port", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.Service.Port = ptr[int32](8443) })
				}},
				{name: "another path", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.Service.Path = ptr("/authorize") })
				}},
				{name: "another Service", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.Service.Name = "nodeguard" })
				}},
			},
		},
		{
			name:  "every rollout's selector reaches the webhook",
			check: plain(checkRolloutSelectorWebhook),
			breaks: []breakage{
				{name: "no rollouts webhook", apply: func(t *testing.T, o objects) {
					editVWC(t, o, func(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
						cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(h admissionregistrationv1.ValidatingWebhook) bool {
							return strings.HasPrefix(h.Name, "rollouts.")
						})
					})
				}},
				{name: "creation only", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "rollouts.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
					})
				}},
				{name: "every update goes to the webhook", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "rollouts.", func(h *admissionregistrationv1.ValidatingWebhook) { h.MatchConditions[0].Expression = "true" })
				}},
				{name: "a changed selector does not", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "rollouts.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.MatchConditions[0].Expression = "request.operation == 'CREATE'"
					})
				}},
			},
		},
		{
			name:  "the nodes webhook's matchConditions compile and pick the right writes",
			check: plain(checkNodeMatchConditions),
			breaks: []breakage{
				{name: "no matchConditions", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.MatchConditions = nil })
				}},
				{name: "does not compile", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.MatchConditions[0].Expression = "'system:nodes' in request.userInfo.groupz"
					})
				}},
				{name: "everything goes to the webhook", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.MatchConditions[0].Expression = "true" })
				}},
				{name: "only nodes go to the webhook", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) {
						h.MatchConditions[0].Expression = "'system:nodes' in request.userInfo.groups"
					})
				}},
			},
		},
	}
}

// certificateInvariants are about where keys and CAs go. otherCA is a CA
// that has nothing to do with the manifests.
func certificateInvariants(otherCA *certs.CA, otherCAKey []byte) []invariant {
	return []invariant{
		{
			name:  "no CA key is shipped into the cluster",
			check: plain(checkNoCAKeys),
			breaks: []breakage{
				{name: "a Secret with a CA key", add: &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "v1", "kind": "Secret",
					"metadata": map[string]any{"name": "leaked", "namespace": namespace},
					"data":     map[string]any{"ca.key": base64.StdEncoding.EncodeToString(otherCAKey)},
				}}},
			},
		},
		{
			name:  "cert-manager injects the CA of the certificate the webhook serves",
			only:  []string{certManager},
			check: plain(checkCertManager),
			breaks: []breakage{
				{name: "injects from a missing Certificate", apply: func(t *testing.T, o objects) {
					editVWC(t, o, func(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
						cfg.Annotations[injectCAFrom] = namespace + "/nodeguard-webhook-ca-typo"
					})
				}},
				{name: "serving Certificate writes another Secret", apply: func(t *testing.T, o objects) {
					setNested(t, o, "Certificate", webhookName, "nodeguard-webhook-cert", "spec", "secretName")
				}},
				{name: "serving Certificate lacks the .svc name", apply: func(t *testing.T, o objects) {
					setNested(t, o, "Certificate", webhookName, []any{webhookName + "." + namespace}, "spec", "dnsNames")
				}},
				{name: "serving Certificate from the client CA", apply: func(t *testing.T, o objects) {
					setNested(t, o, "Certificate", webhookName, "nodeguard-selfsigned", "spec", "issuerRef", "name")
				}},
				{name: "client certificate from the serving CA", apply: func(t *testing.T, o objects) {
					setNested(t, o, "Certificate", "nodeguard-apiserver-client", "nodeguard-webhook-ca", "spec", "issuerRef", "name")
				}},
			},
		},
		{
			name:  "caBundle verifies the serving certificate",
			only:  []string{staticCerts},
			check: plain(checkStaticCerts),
			breaks: []breakage{
				{name: "another CA", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "configmaps.", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.CABundle = otherCA.CertPEM() })
				}},
				{name: "no caBundle", apply: func(t *testing.T, o objects) {
					editWebhook(t, o, "nodes.", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.CABundle = nil })
				}},
				{name: "key of another certificate", apply: func(t *testing.T, o objects) {
					edit(t, o, "Secret", servingSecret, func(s *corev1.Secret) { s.Data["tls.key"] = otherCAKey })
				}},
			},
		},
		{
			name:  "the client CA Secret holds only the CA certificate",
			only:  []string{staticCerts},
			check: plain(checkClientCASecret),
			breaks: []breakage{
				{name: "with its key", apply: func(t *testing.T, o objects) {
					edit(t, o, "Secret", clientCASecret, func(s *corev1.Secret) { s.Data["ca.key"] = otherCAKey })
				}},
				{name: "a leaf instead of the CA", apply: func(t *testing.T, o objects) {
					edit(t, o, "Secret", clientCASecret, func(s *corev1.Secret) {
						leaf, _, err := otherCA.IssueClientCert(time.Minute, "kube-apiserver")
						if err != nil {
							t.Fatal(err)
						}
						s.Data["ca.crt"] = leaf
					})
				}},
			},
		},
	}
}
