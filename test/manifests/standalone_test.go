package manifests

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// standalone is base with the component for clusters without
// NodeRestriction.
const standalone = "overlays/standalone"

// TestStandaloneOverlay: without NodeRestriction every node write to a Node
// reaches the nodes webhook (and an administrator's only where rules 3 and
// 5 judge it), and a pods webhook sees every pod write of a node and
// nobody else's, in every namespace.
func TestStandaloneOverlay(t *testing.T) {
	o := render(t, standalone)
	if err := checkStandaloneMatchConditions(o); err != nil {
		t.Error(err)
	}
	hook, err := nodesWebhook(o)
	if err != nil {
		t.Fatal(err)
	}
	if ops := hook.Rules[0].Operations; !slices.Contains(ops, admissionregistrationv1.Delete) {
		t.Errorf("the nodes webhook does not see a node deleting a Node: %v", ops)
	}

	cfg, err := webhookConfiguration(o)
	if err != nil {
		t.Fatal(err)
	}
	var pods *admissionregistrationv1.ValidatingWebhook
	for i := range cfg.Webhooks {
		if cfg.Webhooks[i].Name == "pods.nodeguard.dev" {
			pods = &cfg.Webhooks[i]
		}
	}
	if pods == nil {
		t.Fatal("no pods.nodeguard.dev webhook")
	}
	if pods.NamespaceSelector != nil && len(pods.NamespaceSelector.MatchExpressions)+len(pods.NamespaceSelector.MatchLabels) > 0 {
		t.Errorf("the pods webhook exempts namespaces (%v): mirror pods live in kube-system", pods.NamespaceSelector)
	}
	if pods.FailurePolicy == nil || *pods.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("the pods webhook does not fail closed")
	}
	want := []string{"pods", "pods/status", "pods/eviction"}
	if got := pods.Rules[0].Resources; !slices.Equal(got, want) {
		t.Errorf("pods webhook resources %v, want %v", got, want)
	}
	matcher, err := compileMatchConditions(pods)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "p"}}
	for _, tc := range []struct {
		name string
		from *nodeWrite
		want bool
	}{
		{"a node creates a pod", &nodeWrite{user: kubelet}, true},
		{"an administrator creates a pod", &nodeWrite{user: admin}, false},
	} {
		gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
		var object runtime.Object = pod
		attrs := admission.NewAttributesRecord(object, nil, gvk, pod.Namespace, pod.Name,
			schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", admission.Create, nil, false, tc.from.user)
		result := matcher.Match(context.Background(), &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk,
			VersionedObject: admission.NewLazyObject(object)}, nil, nil)
		if result.Error != nil || result.Matches != tc.want {
			t.Errorf("%s: reaches the pods webhook %v (%v), want %v", tc.name, result.Matches, result.Error, tc.want)
		}
	}
}
