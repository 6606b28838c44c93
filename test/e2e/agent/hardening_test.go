package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestAgentRefusesWhatTheWebhookRefuses: a configuration that reached the
// node without the webhook's judgement is held to the same rules by the
// agent, before anything is written. Here the suite's webhook runs no Rego
// policy (so dangerous_fields never sees the ConfigMaps) and forbids fewer
// fields than the agent's --settings: each refusal is a validation
// failure naming the field, the kubelet's file stays as it was and the
// kubelet is not restarted; the ConfigMap's allowance annotation lifts a
// dangerous field, as it does at the webhook.
func TestAgentRefusesWhatTheWebhookRefuses(t *testing.T) {
	settings := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(settings, []byte("apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\nforbiddenDynamicFields: [maxOpenFiles]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, nodeOptions{agentArgs: []string{"--settings=" + settings}})
	n.waitReport("the local configuration", func(o framework.Report) bool { return reason(o, corev1.ConditionTrue, contract.ReasonLocalConfig) })
	before := n.kubeletFile()

	refusedFor := func(cm *corev1.ConfigMap, field string) {
		t.Helper()
		o := n.waitReport("the refusal of "+field, func(o framework.Report) bool {
			return is(o.Status.Assigned, cm) && o.Status.Active == nil && reason(o, corev1.ConditionFalse, contract.ReasonValidationFailed)
		})
		if !strings.Contains(o.Status.Error, field) {
			t.Errorf("the status does not name %s: %q", field, o.Status.Error)
		}
		if n.kubeletFile() != before {
			t.Errorf("the kubelet file changed:\n%s", n.kubeletFile())
		}
		if got := n.restarts(); len(got) != 1 {
			t.Errorf("the kubelet was restarted: %v", got)
		}
	}

	// CIS 4.2.13, one of the shipped dangerous fields.
	pids := n.configMap("kubelet-pids", "podPidsLimit: -1\n")
	n.assign("kubelet-pids")
	refusedFor(pids, "podPidsLimit")

	files := n.configMap("kubelet-files", "maxOpenFiles: 100000\n")
	n.assign("kubelet-files")
	refusedFor(files, "maxOpenFiles")

	// Allowed by its own name, as the webhook allows it.
	pids = n.allowDangerous(pids, "podPidsLimit")
	n.assign("kubelet-pids")
	n.passed(pids)
}

// allowDangerous annotates cm to allow the dangerous fields named (comma
// separated), as an operator would, and returns it as stored.
func (n *node) allowDangerous(cm *corev1.ConfigMap, fields string) *corev1.ConfigMap {
	n.t.Helper()
	cm = cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[contract.AllowDangerousFieldsAnnotation] = fields
	stored, err := env.Admin.CoreV1().ConfigMaps(cm.Namespace).Update(n.ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return stored
}
