package manifests

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// standalone is base with the component for clusters without
// NodeRestriction.
const standalone = "overlays/standalone"

// TestStandaloneOverlay: without NodeRestriction every node write to a Node
// reaches the nodes webhook (and an administrator's only where rules 3 and
// 5 judge it), a pods webhook sees every pod write of a node and nobody
// else's, in every namespace, and the other resources NodeRestriction
// confines reach the webhook for nodes only (TestStandaloneNodeWrites).
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
	want := []string{"pods", "pods/*"}
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

// standaloneWrite is a write of one of the resources NodeRestriction
// confines beside Nodes and pods.
type standaloneWrite struct {
	name        string
	gvr         schema.GroupVersionResource
	kind        string
	subresource string
	namespace   string
	objectName  string
	operation   admission.Operation
	user        *nodeWrite
	want        bool
}

// TestStandaloneNodeWrites: each resource NodeRestriction confines reaches
// a webhook of the standalone overlay when a node writes it, and only then,
// in every namespace; a node's renewal of its own Lease does not (it is
// what the rule allows, every 10 s from every kubelet), another's does.
func TestStandaloneNodeWrites(t *testing.T) {
	o := render(t, standalone)
	cfg, err := webhookConfiguration(o)
	if err != nil {
		t.Fatal(err)
	}
	node, administrator := &nodeWrite{user: kubelet}, &nodeWrite{user: admin}
	lease := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	for _, w := range []standaloneWrite{
		{"a node renews its own Lease", lease, "Lease", "", "kube-node-lease", "node-a", admission.Update, node, false},
		{"a node renews another's Lease", lease, "Lease", "", "kube-node-lease", "node-b", admission.Update, node, true},
		{"a node creates a Lease", lease, "Lease", "", "kube-node-lease", "node-a", admission.Create, node, true},
		{"a node renews a Lease of its name elsewhere", lease, "Lease", "", "kube-system", "node-a", admission.Update, node, true},
		{"a node deletes its own Lease", lease, "Lease", "", "kube-node-lease", "node-a", admission.Delete, node, true},
		{"an administrator renews a Lease", lease, "Lease", "", "kube-system", "kube-scheduler", admission.Update, administrator, false},
		{"a node writes a CSINode", schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes"}, "CSINode", "", "", "node-b", admission.Update, node, true},
		{"a node writes CSINode status", schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes"}, "CSINode", "status", "", "node-b", admission.Update, node, true},
		{"a node asks for a certificate", schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}, "CertificateSigningRequest", "", "", "", admission.Create, node, true},
		{"a node creates a ResourceSlice", schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}, "ResourceSlice", "", "", "", admission.Create, node, true},
		{"a node deletes a ResourceSlice", schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}, "ResourceSlice", "", "", "s", admission.Delete, node, true},
		{"a node asks for a token", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "TokenRequest", "token", "kube-system", "default", admission.Create, node, true},
		{"a node writes a claim's status", schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim", "status", "default", "data", admission.Update, node, true},
		{"a node creates a claim", schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim", "", "default", "", admission.Create, node, true},
		{"a node asks for a pod certificate", schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"}, "PodCertificateRequest", "", "default", "", admission.Create, node, true},
		{"a node binds a pod", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Binding", "binding", "default", "p", admission.Create, node, true},
		{"an administrator writes a claim", schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim", "", "default", "", admission.Create, administrator, false},
		{"an administrator asks for a token", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "TokenRequest", "token", "default", "default", admission.Create, administrator, false},
	} {
		t.Run(w.name, func(t *testing.T) {
			gvk := schema.GroupVersionKind{Group: w.gvr.Group, Version: w.gvr.Version, Kind: w.kind}
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			obj.SetName(w.objectName)
			obj.SetNamespace(w.namespace)
			var object, oldObject runtime.Object
			if w.operation != admission.Delete {
				object = obj
			}
			if w.operation != admission.Create {
				oldObject = obj
			}
			attrs := admission.NewAttributesRecord(object, oldObject, gvk, w.namespace, w.objectName, w.gvr, w.subresource, w.operation, nil, false, w.user.user)
			versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk,
				VersionedObject: admission.NewLazyObject(object), VersionedOldObject: admission.NewLazyObject(oldObject)}
			var reached []string
			for i := range cfg.Webhooks {
				hook := &cfg.Webhooks[i]
				if !rulesMatch(hook, w.gvr, w.subresource, w.operation) {
					continue
				}
				matcher, err := compileMatchConditions(hook)
				if err != nil {
					t.Fatal(err)
				}
				result := matcher.Match(context.Background(), versioned, nil, nil)
				if result.Error != nil {
					t.Fatalf("%s: matchConditions failed: %v", hook.Name, result.Error)
				}
				if result.Matches {
					reached = append(reached, hook.Name)
				}
			}
			if got := len(reached) > 0; got != w.want {
				t.Fatalf("reaches %v, want reached %v", reached, w.want)
			}
		})
	}
}

// rulesMatch is the rule half of kube-apiserver's matching: group,
// version, resource (with "res/*" for any subresource), operation.
func rulesMatch(hook *admissionregistrationv1.ValidatingWebhook, gvr schema.GroupVersionResource, subresource string, op admission.Operation) bool {
	resource := gvr.Resource
	if subresource != "" {
		resource += "/" + subresource
	}
	for _, rule := range hook.Rules {
		if !slices.Contains(rule.APIGroups, gvr.Group) || !slices.Contains(rule.APIVersions, gvr.Version) {
			continue
		}
		if !slices.Contains(rule.Operations, admissionregistrationv1.OperationType(op)) {
			continue
		}
		for _, r := range rule.Resources {
			if r == resource || (subresource != "" && r == gvr.Resource+"/*") {
				return true
			}
		}
	}
	return false
}
