package framework

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

const (
	admissionConfigManifest     = "manifests/control-plane/admission-config.yaml"
	admissionKubeconfigManifest = "manifests/control-plane/admission-webhook.kubeconfig"
	// shippedAdmissionKubeconfigPath is where admission-config.yaml expects
	// the kubeconfig on a control-plane node.
	shippedAdmissionKubeconfigPath = "/etc/kubernetes/nodeguard/admission-webhook.kubeconfig"
)

// writeAdmissionFiles fills the shipped admission templates for a webhook at
// host (host:port) and returns the AdmissionConfiguration's path.
func writeAdmissionFiles(dir, host, certFile, keyFile string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	template, err := os.ReadFile(filepath.Join(root, admissionKubeconfigManifest))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", admissionKubeconfigManifest, err)
	}
	values := map[string]string{"NODEGUARD_WEBHOOK_HOST": host, "APISERVER_CLIENT_CERT_FILE": certFile, "APISERVER_CLIENT_KEY_FILE": keyFile}
	var missing []string
	filled := os.Expand(string(template), func(name string) string {
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s: no value for %v", admissionKubeconfigManifest, missing)
	}
	if _, err := clientcmd.Load([]byte(filled)); err != nil {
		return "", fmt.Errorf("%s: %w", admissionKubeconfigManifest, err)
	}
	kubeconfig := filepath.Join(dir, "admission-webhook.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(filled), 0o600); err != nil {
		return "", fmt.Errorf("writing admission kubeconfig: %w", err)
	}

	config, err := os.ReadFile(filepath.Join(root, admissionConfigManifest))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", admissionConfigManifest, err)
	}
	if !bytes.Contains(config, []byte(shippedAdmissionKubeconfigPath)) {
		return "", fmt.Errorf("%s no longer points at %s", admissionConfigManifest, shippedAdmissionKubeconfigPath)
	}
	config = bytes.ReplaceAll(config, []byte(shippedAdmissionKubeconfigPath), []byte(kubeconfig))
	scheme := runtime.NewScheme()
	if err := apiserverv1.AddToScheme(scheme); err != nil {
		return "", err
	}
	if _, _, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode(config, nil, nil); err != nil {
		return "", fmt.Errorf("%s: %w", admissionConfigManifest, err)
	}
	path := filepath.Join(dir, "admission-config.yaml")
	if err := os.WriteFile(path, config, 0o644); err != nil {
		return "", fmt.Errorf("writing admission config: %w", err)
	}
	return path, nil
}

// pointWebhooksAt does what cert-manager's CA injection and a reachable
// Service do in a cluster: every webhook of nodeguard's
// ValidatingWebhookConfiguration gets the local URL and the serving CA.
func pointWebhooksAt(objs []*unstructured.Unstructured, url string, caBundle []byte) error {
	found := false
	for _, obj := range objs {
		if obj.GetKind() != "ValidatingWebhookConfiguration" || !strings.HasPrefix(obj.GetName(), "nodeguard") {
			continue
		}
		found = true
		webhooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("%s: %w", obj.GetName(), err)
		}
		for i, w := range webhooks {
			hook, ok := w.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: webhooks[%d] is not an object", obj.GetName(), i)
			}
			cc, _, _ := unstructured.NestedMap(hook, "clientConfig")
			path := "/validate"
			if svc, ok := cc["service"].(map[string]any); ok {
				if p, ok := svc["path"].(string); ok {
					path = p
				}
			}
			hook["clientConfig"] = map[string]any{"url": url + path, "caBundle": caBundleString(caBundle)}
			webhooks[i] = hook
		}
		if err := unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks"); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("no nodeguard ValidatingWebhookConfiguration in the rendered manifests")
	}
	return nil
}
