package authz

import (
	"encoding/json"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecodeReview feeds arbitrary bodies to the review decoder: nothing
// may panic, and a review it reads without repeated keys must read the same
// once re-encoded.
func FuzzDecodeReview(f *testing.F) {
	seeds := []authorizationv1.SubjectAccessReview{
		{TypeMeta: metav1.TypeMeta{APIVersion: sarAPIVersion, Kind: sarKind}, Spec: *nodeSpec("n1", cmRead("get", "ns", "a"))},
		{TypeMeta: metav1.TypeMeta{APIVersion: sarAPIVersion, Kind: sarKind}, Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:n1", Groups: []string{"system:nodes"}, UID: "u", Extra: map[string]authorizationv1.ExtraValue{"k": {"v"}},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "configmaps", Namespace: "ns", Name: "a",
				FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "metadata.name=a",
					Requirements: []metav1.FieldSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"a"}}}},
				LabelSelector: &authorizationv1.LabelSelectorAttributes{RawSelector: "x=y"}}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: sarAPIVersion, Kind: sarKind}, Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:n1", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}}},
	}
	for _, s := range seeds {
		body, _ := json.Marshal(s)
		f.Add(body)
	}
	for _, s := range []string{`{}`, `[]`, `null`, `{"spec":{"groups":[1]}}`, `{"spec":{"resourceAttributes":{"verb":"get"},"resourceAttributes":{"name":"x"}}}`,
		`{"spec":{"user":"a\u00e9","extra":{}}}`, `{"spec":{"resourceAttributes":{"fieldSelector":{"requirements":[]},"labelSelector":{"requirements":[]}}}}`, `{"spec":{"user":"\xff"}}`, `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":null}`} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","user":"system:node:n1"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, repeated, err := decodeReview(body)
		if err != nil || repeated != nil {
			return
		}
		// A review read without repeats reads the same once re-encoded
		// (where omitempty makes empty and absent alike).
		encoded, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("re-encoding %q: %v", body, err)
		}
		again, repeated, err := decodeReview(encoded)
		if err != nil || repeated != nil || !apiequality.Semantic.DeepEqual(got, again) {
			t.Fatalf("decodeReview(%q) = %#v; once re-encoded as %q: %#v, %v, %v", body, got, encoded, again, repeated, err)
		}
	})
}
