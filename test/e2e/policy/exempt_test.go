package policy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestExemptNamespaceCannotBeAllowed is issue 17 item 2. The admission
// webhook never sees kube-system (namespaceSelector), so an eligible
// ConfigMap there is never judged; config_namespaces keeps nodes from being
// assigned one, unless allowed_namespaces names kube-system, as
// --policy-data's help once suggested. Such a configuration must not load.
func TestExemptNamespaceCannotBeAllowed(t *testing.T) {
	s := newScenario(t)
	dangerous := goodConfig + "staticPodURL: http://198.51.100.7/pods\nauthorization:\n  mode: AlwaysAllow\n"
	cm := kubeletConfigMap("kube-system", s.pfx+"-attack", dangerous, nil)
	// Created: kube-system is exempt, nothing judges it.
	s.mustCreateConfigMap(cm)
	node := s.node("exempt", "")
	assign := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, contract.ConfigSourceAnnotation, "kube-system/"+cm.Name)

	data := filepath.Join(t.TempDir(), "policy-data.yaml")
	if err := os.WriteFile(data, []byte("allowed_namespaces: [kube-system, "+configNamespace+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// t.Context() has ended by the time cleanups run.
	t.Cleanup(func() {
		if err := env.RestartWebhookWith(context.Background()); err != nil {
			t.Errorf("restarting the webhook with the suite's flags: %v", err)
		}
	})
	err := env.RestartWebhookWith(s.ctx, "--policy-data="+data)
	if err == nil {
		// What the issue saw: assigned and read.
		_, assignErr := s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, assign, metav1.PatchOptions{})
		_, readErr := s.nodeClient(node).CoreV1().ConfigMaps("kube-system").Get(s.ctx, cm.Name, metav1.GetOptions{})
		t.Fatalf("the webhook started with kube-system allowed; assigning the unjudged kube-system/%s: %v; the node reading it: %v", cm.Name, assignErr, readErr)
	}
	for _, want := range []string{"--policy-data " + data, "allowed_namespaces names kube-system, which the admission webhook does not judge"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the webhook's refusal does not say %q:\n%v", want, err)
		}
	}

	// With the suite's own configuration, the assignment is refused.
	if err := env.RestartWebhookWith(s.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.admin.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, assign, metav1.PatchOptions{})
	forbiddenBy(t, "assigning a kube-system configuration", err, "nodeguard policy nodeguard.admission/config_namespaces: ")
	if _, err := s.nodeClient(node).CoreV1().ConfigMaps("kube-system").Get(s.ctx, cm.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node reads the unassigned kube-system/%s: %v", cm.Name, err)
	}
}
