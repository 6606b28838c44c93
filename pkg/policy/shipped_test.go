package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// These tests run the shipped policies on inputs built the way the webhook
// builds them (typed objects, a configuration decoded by pkg/kubeletconfig),
// to keep the Rego tests' hand-written inputs honest.

func configMapWrite(t *testing.T, op admissionv1.Operation, namespace, name string, annotations map[string]string, kubelet string) *AdmissionInput {
	t.Helper()
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, Annotations: annotations,
			Labels: map[string]string{"nodeguard.dev/kubelet-config": "true"},
		},
		Data: map[string]string{"kubelet": kubelet},
	}
	raw, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeletconfig.DecodeConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	return &AdmissionInput{Request: configMapRequest(op, namespace, name, string(raw)), KubeletConfig: cfg}
}

func nodeWrite(t *testing.T, name string, labels, annotations map[string]string, old *corev1.Node) *AdmissionInput {
	t.Helper()
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
	}
	req := &admissionv1.AdmissionRequest{
		UID:       "u",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		Name:      name,
		Operation: admissionv1.Update,
	}
	var err error
	if req.Object.Raw, err = json.Marshal(node); err != nil {
		t.Fatal(err)
	}
	if old == nil {
		req.Operation = admissionv1.Create
	} else if req.OldObject.Raw, err = json.Marshal(old); err != nil {
		t.Fatal(err)
	}
	return &AdmissionInput{Request: req}
}

func rulesOf(vs []Violation) string {
	var rules []string
	for _, v := range vs {
		rules = append(rules, v.Rule)
	}
	return strings.Join(rules, ",")
}

func TestShippedAdmissionPolicies(t *testing.T) {
	e, err := New(testContext(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const plain = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n"
	const anonymous = plain + "authentication:\n  anonymous:\n    enabled: true\n"
	const noSwap = plain + "failSwapOn: false\n"
	allow := map[string]string{"nodeguard.dev/allow-dangerous-fields": "true"}
	assign := func(v string) map[string]string { return map[string]string{"nodeguard.dev/config-source": v} }

	tests := []struct {
		name               string
		in                 *AdmissionInput
		wantDeny, wantWarn string
	}{
		{name: "plain config in kubelet-configs", in: configMapWrite(t, admissionv1.Create, "kubelet-configs", "kubelet-gpu", nil, plain)},
		{name: "config elsewhere", in: configMapWrite(t, admissionv1.Create, "default", "kubelet-gpu", nil, plain), wantDeny: "config_namespaces"},
		{name: "anonymous auth", in: configMapWrite(t, admissionv1.Update, "kubelet-configs", "kubelet-gpu", nil, anonymous), wantDeny: "dangerous_fields"},
		{name: "anonymous auth allowed", in: configMapWrite(t, admissionv1.Update, "kubelet-configs", "kubelet-gpu", allow, anonymous), wantWarn: "dangerous_fields"},
		{name: "swap", in: configMapWrite(t, admissionv1.Update, "kubelet-configs", "kubelet-gpu", nil, noSwap), wantWarn: "dangerous_fields"},
		{
			name:     "assignment from elsewhere to a pool node",
			in:       nodeWrite(t, "node-1", map[string]string{"nodeguard.dev/pool": "gpu"}, assign("default/kubelet-cpu"), &corev1.Node{}),
			wantDeny: "config_namespaces,pool_naming",
		},
		{
			name: "unchanged assignment",
			in: nodeWrite(t, "node-1", map[string]string{"nodeguard.dev/pool": "gpu"}, assign("default/kubelet-cpu"), &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"nodeguard.dev/pool": "gpu"}, Annotations: assign("default/kubelet-cpu")},
			}),
		},
		{name: "node create", in: nodeWrite(t, "node-1", nil, assign("kubelet-configs/kubelet-gpu"), nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.EvalAdmission(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := rulesOf(res.Deny); got != tt.wantDeny {
				t.Errorf("denied by %q, want %q: %v", got, tt.wantDeny, res.Deny)
			}
			if got := rulesOf(res.Warn); got != tt.wantWarn {
				t.Errorf("warned by %q, want %q: %v", got, tt.wantWarn, res.Warn)
			}
		})
	}
}

func TestShippedAuthzPolicies(t *testing.T) {
	g := &fakeGraph{nodes: map[string]*graph.NodeInfo{
		"node-1": nodeInfo("node-1", map[string]string{"nodeguard.dev/maintenance": "true"}, "kube-system/kubelet-gpu"),
		"node-2": nodeInfo("node-2", nil, "kube-system/kubelet-gpu"),
	}}
	e, err := New(testContext(t), Options{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		user     string
		cm       string
		wantDeny bool
	}{
		{"system:node:node-1", "kubelet-gpu", true},
		{"system:node:node-1", "kube-root-ca.crt", false},
		{"system:node:node-2", "kubelet-gpu", false},
		{"admin", "kubelet-gpu", false},
	}
	for _, tt := range tests {
		groups := []string{"system:nodes"}
		spec := configMapRead(tt.user, groups, "kube-system", tt.cm)
		node, version, labels := NodeOf(spec.User, spec.Groups, g)
		res, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: spec, Node: node, KubeletVersion: version, NodeLabels: labels})
		if err != nil {
			t.Fatal(err)
		}
		if res.Denied() != tt.wantDeny || res.Allowed() {
			t.Errorf("%s reading %s: %+v, want denied=%v", tt.user, tt.cm, res, tt.wantDeny)
		}
	}
}
