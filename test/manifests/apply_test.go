package manifests

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// TestOverlaysApply applies the overlays to a real kube-apiserver, which
// validates every object strictly (the e2e tests apply the base the same
// way). cert-manager's own kinds are left out: the test apiserver has no
// cert-manager CRDs.
func TestOverlaysApply(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	admin, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	// static-certs last: its caBundle is checked below.
	for _, name := range []string{certManager, standalone, staticCerts} {
		var objs []*unstructured.Unstructured
		for _, obj := range render(t, name) {
			if !strings.HasPrefix(obj.GetAPIVersion(), "cert-manager.io/") {
				objs = append(objs, obj)
			}
		}
		if err := Apply(t.Context(), cp.AdminConfig(), objs); err != nil {
			t.Fatalf("applying %s: %v", name, err)
		}
	}

	// The static-certs overlay, applied last, carries its CA in caBundle as
	// kustomize wrote it (base64 wrapped over several lines): the apiserver
	// must have decoded it to the CA in the serving Secret.
	vwc, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), vwcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := admin.CoreV1().Secrets(namespace).Get(t.Context(), servingSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	if !bytes.HasPrefix(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Fatalf("Secret %s ca.crt is not a PEM certificate: %q", servingSecret, ca)
	}
	for _, hook := range vwc.Webhooks {
		if !bytes.Equal(hook.ClientConfig.CABundle, ca) {
			t.Errorf("webhook %s: caBundle in the cluster differs from the serving Secret's ca.crt", hook.Name)
		}
	}
}
