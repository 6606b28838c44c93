package manifests

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// TestOverlaysApply applies the overlays to a real kube-apiserver, which
// validates every object strictly (the e2e tests apply the base the same
// way), and has the apiserver's own Pod Security admission judge the
// workloads' pods in their namespaces. cert-manager's own kinds are left
// out: the test apiserver has no cert-manager CRDs.
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
		t.Run("pod security/"+name, func(t *testing.T) { checkPodSecurityAdmission(t, cp.AdminConfig(), objs) })
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

// checkPodSecurityAdmission creates, as a server-side dry run, a pod from
// each workload's template in its namespace: the apiserver's Pod Security
// admission (on by default) must admit each, the webhook's and the
// controller's without a warning at restricted's latest version, the
// agent's with baseline's warnings. Pods that break restricted are refused
// in nodeguard, so the namespace's label is in force.
func checkPodSecurityAdmission(t *testing.T, admin *rest.Config, objs objects) {
	cfg := rest.CopyConfig(admin)
	warnings := &warningRecorder{}
	cfg.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dryRun := func(ns string, template corev1.PodTemplateSpec) ([]string, error) {
		warnings.take()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-security-", Namespace: ns, Labels: template.Labels}, Spec: template.Spec}
		_, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return warnings.take(), err
	}
	list, err := workloads(objs)
	if err != nil {
		t.Fatal(err)
	}
	var agent *workload
	for i, w := range list {
		got, err := dryRun(w.namespace, w.template)
		if err != nil {
			t.Errorf("%s %s/%s: its pods are refused: %v", w.kind, w.namespace, w.name, err)
			continue
		}
		t.Logf("%s %s/%s: admitted, warnings %q", w.kind, w.namespace, w.name, got)
		switch w.namespace {
		case namespace:
			if len(got) > 0 {
				t.Errorf("%s %s/%s: warned %q; its pods must meet restricted at the latest version too", w.kind, w.namespace, w.name, got)
			}
		case agentNamespace:
			agent = &list[i]
			if !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, `"baseline:latest"`) }) {
				t.Errorf("%s %s/%s: warnings %q, want baseline's", w.kind, w.namespace, w.name, got)
			}
		}
	}
	if agent == nil {
		t.Fatalf("no workload in %s", agentNamespace)
	}
	refused := map[string]corev1.PodTemplateSpec{
		"the agent's pod":               agent.template,
		"a pod with no securityContext": {Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: webhookImage}}}},
	}
	for what, template := range refused {
		_, err := dryRun(namespace, template)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:`) {
			t.Errorf("%s in %s: %v, want a refusal by Pod Security's restricted level", what, namespace, err)
			continue
		}
		t.Logf("%s in %s: refused: %v", what, namespace, err)
	}
}

// warningRecorder keeps the apiserver's warnings until taken.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	taken := w.warnings
	w.warnings = nil
	return taken
}
