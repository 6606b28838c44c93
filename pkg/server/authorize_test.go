package server

import (
	"context"
	"encoding/json"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
)

func TestAuthorize(t *testing.T) {
	review := reviewOf(Authorize(authz.New(reviewtest.Graph(true), nil), nil, testMaxBody))
	sar := func(apiVersion, kind string, spec *authorizationv1.SubjectAccessReviewSpec) []byte {
		body, _ := json.Marshal(authorizationv1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}, Spec: *spec})
		return body
	}
	tests := []struct {
		name    string
		body    []byte
		wantErr string
		allowed bool
	}{
		{"allowed", sar("authorization.k8s.io/v1", "SubjectAccessReview", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))), "", true},
		{"no opinion", sar("authorization.k8s.io/v1", "SubjectAccessReview", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "other"))), "", false},
		{"v1beta1 refused", sar("authorization.k8s.io/v1beta1", "SubjectAccessReview", reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))), "expected authorization.k8s.io/v1 SubjectAccessReview", false},
		{"wrong kind", sar("authorization.k8s.io/v1", "LocalSubjectAccessReview", reviewtest.NodeSpec("n1", nil)), "expected", false},
		{"missing type meta", []byte(`{"spec":{"user":"system:node:n1"}}`), "expected", false},
		{"not JSON", []byte(`<xml/>`), "decoding SubjectAccessReview", false},
		{"truncated", []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{`), "decoding", false},
		{"wrong field type", []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"groups":"system:nodes"}}`), "decoding", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, answered := runReview(t, review, tt.body, tt.wantErr)
			if !answered {
				return
			}
			out := decodeSAR(t, resp)
			if out.APIVersion != "authorization.k8s.io/v1" || out.Kind != "SubjectAccessReview" {
				t.Fatalf("response type meta %v", out.TypeMeta)
			}
			if out.Status.Allowed != tt.allowed || out.Status.Denied || out.Status.Reason == "" {
				t.Fatalf("status = %+v", out.Status)
			}
		})
	}
}

func TestAuthorizeRecoversPanics(t *testing.T) {
	review := reviewOf(Authorize(authz.New(panicky{}, nil), nil, testMaxBody))
	body, _ := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     *reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))})
	resp, err := review(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	st := decodeSAR(t, resp).Status
	if st.Allowed || st.Denied || st.EvaluationError == "" || st.Reason != authz.ReasonInternalError {
		t.Fatalf("status after panic = %+v", st)
	}
}

func TestAuthorizeHonoursDeadline(t *testing.T) {
	review := reviewOf(Authorize(authz.New(reviewtest.Graph(true), nil), nil, testMaxBody))
	body, _ := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     *reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "assigned"))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := review(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	if st := decodeSAR(t, resp).Status; st.Allowed || st.Reason != authz.ReasonTimedOut {
		t.Fatalf("status past deadline = %+v", st)
	}
}

// FuzzDecodeSubjectAccessReview feeds arbitrary bodies to the review decoder: nothing
// may panic, and a review it reads without repeated keys must read the same
// once re-encoded.
func FuzzDecodeSubjectAccessReview(f *testing.F) {
	seeds := []authorizationv1.SubjectAccessReview{
		{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}, Spec: *reviewtest.NodeSpec("n1", reviewtest.ConfigMapRead("get", "ns", "a"))},
		{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}, Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:n1", Groups: []string{"system:nodes"}, UID: "u", Extra: map[string]authorizationv1.ExtraValue{"k": {"v"}},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "configmaps", Namespace: "ns", Name: "a",
				FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "metadata.name=a",
					Requirements: []metav1.FieldSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"a"}}}},
				LabelSelector: &authorizationv1.LabelSelectorAttributes{RawSelector: "x=y"}}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}, Spec: authorizationv1.SubjectAccessReviewSpec{
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
		checkReencoded(t, "decodeSubjectAccessReview", decodeSubjectAccessReview, nil, body)
	})
}
