package policy

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/pkg/graph"
)

// viaJSON is the reference rendering: the document encoding/json produces,
// decoded the way OPA decodes JSON input.
func viaJSON(t *testing.T, doc any) ast.Value {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := util.UnmarshalJSON(raw, &x); err != nil {
		t.Fatal(err)
	}
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fullAdmissionRequest sets every field of AdmissionRequest, to check that
// each is rendered.
func fullAdmissionRequest() *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID:                "705ab4f5-6393-11e8-b7cc-42010a800002",
		Kind:               metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:           metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		SubResource:        "status",
		RequestKind:        &metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Node"},
		RequestResource:    &metav1.GroupVersionResource{Group: "", Version: "v1", Resource: "nodes"},
		RequestSubResource: "status",
		Name:               "node-1",
		Namespace:          "set-for-coverage",
		Operation:          admissionv1.Update,
		UserInfo: authenticationv1.UserInfo{
			Username: "system:node:node-1",
			UID:      "uid-node-1",
			Groups:   []string{"system:nodes", "system:authenticated"},
			Extra:    map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"X509SHA256=abc"}, "empty": nil},
		},
		Object:    runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","labels":{"a":"b"}},"status":{"capacity":{"cpu":"4"},"allocatable":{"pods":110}}}`)},
		OldObject: runtime.RawExtension{Raw: []byte(` {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1"},"spec":{"unschedulable":true,"weight":1.5e3}} `)},
		DryRun:    ptr.To(false),
		Options:   runtime.RawExtension{Raw: []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"UpdateOptions","fieldManager":"kubelet"}`)},
	}
}

func fullSARSpec() *authorizationv1.SubjectAccessReviewSpec {
	return &authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "kube-system", Verb: "list", Group: "example.com", Version: "v1", Resource: "widgets",
			Subresource: "status", Name: "kubelet-gpu",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{
				RawSelector: "metadata.name=kubelet-gpu",
				Requirements: []metav1.FieldSelectorRequirement{
					{Key: "metadata.name", Operator: metav1.FieldSelectorOpIn, Values: []string{"kubelet-gpu"}},
				},
			},
			LabelSelector: &authorizationv1.LabelSelectorAttributes{
				RawSelector: "a=b,c",
				Requirements: []metav1.LabelSelectorRequirement{
					{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}},
					{Key: "c", Operator: metav1.LabelSelectorOpExists},
				},
			},
		},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"},
		User:                  "system:node:node-1",
		Groups:                []string{"system:nodes"},
		Extra:                 map[string]authorizationv1.ExtraValue{"k": {"v1", "v2"}},
		UID:                   "uid-1",
	}
}

func TestAdmissionInputMatchesJSON(t *testing.T) {
	config := &kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta:     metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		ReadOnlyPort: 10255,
		FailSwapOn:   ptr.To(false),
		FeatureGates: map[string]bool{"A": true},
	}
	tests := []struct {
		name string
		in   AdmissionInput
	}{
		{name: "every field", in: AdmissionInput{
			Request: fullAdmissionRequest(), Node: "node-1", KubeletVersion: "v1.37.2",
			KubeletConfig: config, OldKubeletConfig: &kubeletconfigv1beta1.KubeletConfiguration{},
		}},
		{name: "minimal create", in: AdmissionInput{Request: &admissionv1.AdmissionRequest{
			UID: "u", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: []byte(`{"kind":"ConfigMap","data":{"kubelet":"{}"}}`)},
		}}},
		{name: "delete with old object only", in: AdmissionInput{Request: &admissionv1.AdmissionRequest{
			UID: "u", Operation: admissionv1.Delete, Namespace: "ns", Name: "n",
			OldObject: runtime.RawExtension{Raw: []byte(`{"kind":"ConfigMap"}`)},
		}}},
		{name: "typed object without raw bytes", in: AdmissionInput{Request: &admissionv1.AdmissionRequest{
			UID: "u", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Object: &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"x": "y"}},
			}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Value()
			if err != nil {
				t.Fatal(err)
			}
			want := viaJSON(t, map[string]any{
				"request": tt.in.Request,
				"nodeguard": map[string]any{
					"node": tt.in.Node, "kubeletVersion": tt.in.KubeletVersion, "nodeLabels": map[string]string{},
					"kubeletConfig": tt.in.KubeletConfig, "oldKubeletConfig": tt.in.OldKubeletConfig,
					"dangerousFields": dangerousFields(tt.in.KubeletConfig, tt.in.OldKubeletConfig),
					"riskyFields":     riskyFields(tt.in.KubeletConfig),
				},
			})
			if got.Compare(want) != 0 {
				t.Errorf("input differs from the JSON encoding:\ngot  %s\nwant %s", got, want)
			}
			// What pkg/kubeletconfig/hardening finds is in the input, once.
			if tt.in.KubeletConfig != nil {
				found, _ := got.Find(ast.MustParseRef("x.nodeguard.dangerousFields.readOnlyPort.cis")[1:])
				risky, _ := got.Find(ast.MustParseRef("x.nodeguard.riskyFields.failSwapOn")[1:])
				if found == nil || found.Compare(ast.String("4.2.4")) != 0 || risky == nil {
					t.Errorf("the dangerous and risky fields are missing: %s", got)
				}
			}
		})
	}
}

func TestAuthzInputMatchesJSON(t *testing.T) {
	tests := []struct {
		name string
		in   AuthzInput
	}{
		{name: "every field", in: AuthzInput{Spec: fullSARSpec(), Node: "node-1", KubeletVersion: "v1.37.2", NodeLabels: map[string]string{"a": "b"}}},
		{name: "node get", in: AuthzInput{Spec: configMapRead("system:node:n", []string{"system:nodes"}, "ns", "cm"), Node: "n", NodeLabels: map[string]string{}}},
		{name: "empty spec", in: AuthzInput{Spec: &authorizationv1.SubjectAccessReviewSpec{}, NodeLabels: map[string]string{}}},
		{name: "empty selectors", in: AuthzInput{Spec: &authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				FieldSelector: &authorizationv1.FieldSelectorAttributes{},
				LabelSelector: &authorizationv1.LabelSelectorAttributes{},
			},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{},
		}, NodeLabels: map[string]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Value()
			if err != nil {
				t.Fatal(err)
			}
			want := viaJSON(t, map[string]any{
				"spec":      tt.in.Spec,
				"nodeguard": map[string]any{"node": tt.in.Node, "kubeletVersion": tt.in.KubeletVersion, "nodeLabels": tt.in.NodeLabels},
			})
			if got.Compare(want) != 0 {
				t.Errorf("input differs from the JSON encoding:\ngot  %s\nwant %s", got, want)
			}
		})
	}
}

func TestNodeOf(t *testing.T) {
	g := &fakeGraph{nodes: map[string]*graph.NodeInfo{"node-1": nodeInfo("node-1", map[string]string{"pool": "a"}, "")}}
	tests := []struct {
		user        string
		groups      []string
		graph       GraphReader
		wantNode    string
		wantVersion string
		wantLabels  map[string]string
	}{
		{"system:node:node-1", []string{"system:nodes"}, g, "node-1", "v1.37.2", map[string]string{"pool": "a"}},
		{"system:node:node-2", []string{"system:nodes"}, g, "node-2", "", nil},
		{"system:node:node-1", []string{"system:nodes"}, nil, "node-1", "", nil},
		{"system:node:node-1", []string{"system:authenticated"}, g, "", "", nil},
		{"admin", []string{"system:nodes"}, g, "", "", nil},
	}
	for _, tt := range tests {
		node, version, labels := NodeOf(tt.user, tt.groups, tt.graph)
		if node != tt.wantNode || version != tt.wantVersion || !reflect.DeepEqual(labels, tt.wantLabels) {
			t.Errorf("NodeOf(%q, %v) = %q, %q, %v; want %q, %q, %v", tt.user, tt.groups, node, version, labels, tt.wantNode, tt.wantVersion, tt.wantLabels)
		}
	}
}
