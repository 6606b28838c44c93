package authz

import (
	"encoding/json"
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// FuzzDecodeReview checks the fast decoder against the reflective one: both
// must accept the same inputs and produce the same review, and none may
// panic.
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
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := decodeReview(body)
		var want sarRequest
		wantErr := utiljson.Unmarshal(body, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("decodeReview(%q) error %v, reflective decoder %v", body, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeReview(%q) =\n%#v\nreflective decoder:\n%#v", body, got, want)
		}
	})
}
