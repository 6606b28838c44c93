package admission

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/config"
)

// FuzzReview feeds arbitrary bodies to the /validate review function: it
// must answer or return an error, never panic.
func FuzzReview(f *testing.F) {
	t := &testing.T{}
	review := ReviewFunc(newAdmitter(t, config.Default()), nil)
	valid := reviewBody(t, "admission.k8s.io/v1", nodeReq(n1User, admissionv1.Update, "status", "n1", mkNode("n1"), mkNode("n1")).build(t))
	f.Add(valid)
	f.Add(reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Create, eligibleCM("x", goodConfig), nil).build(t)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"nodes"},"operation":"UPDATE","object":{"metadata":7},"oldObject":[]}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"configmaps"},"operation":"CREATE","object":{"metadata":{"labels":{"nodeguard.dev/kubelet-config":"true"}},"data":{"kubelet":"{{{"}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := review(context.Background(), body)
		if err == nil {
			if r := resp.(*admissionv1.AdmissionReview).Response; r == nil || r.UID == "" {
				t.Fatalf("answer without a UID for %q", body)
			}
		}
	})
}

// FuzzDecodeAdmissionReview feeds arbitrary bodies to the review decoder:
// nothing may panic, and a review it reads without repeated keys must read
// the same once re-encoded.
func FuzzDecodeAdmissionReview(f *testing.F) {
	t := &testing.T{}
	f.Add(reviewBody(t, "admission.k8s.io/v1", nodeReq(n1User, admissionv1.Update, "status", "n1", mkNode("n1"), mkNode("n1")).build(t)))
	f.Add(reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Create, eligibleCM("x", goodConfig), nil).build(t)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":true,"options":{"a":1},"requestKind":{"group":"","version":"v1","kind":"Node"},"userInfo":{"username":"u","extra":{"k":["v"]}},"object":null}}`))
	f.Add([]byte(`{"request":{"userInfo":{"groups":[1]}}}`))
	f.Add([]byte(`{"request":{"kind":{"kind":"A"},"kind":{"group":"B"}}}`))
	f.Add([]byte(`{"request":{"uid":"u","object":{"metadata":{"labels":{"a":"b","a":"c"}}}}}`))
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
		if err != nil || repeated != nil {
			t.Fatalf("decodeReview(%q) of the re-encoded %q: %v, %v", encoded, body, err, repeated)
		}
		if !apiequality.Semantic.DeepEqual(compact(t, got), compact(t, again)) {
			t.Fatalf("decodeReview(%q) =\n%#v\nonce re-encoded:\n%#v", body, got, again)
		}
	})
}

// compact re-encodes a review's embedded objects the one way encoding/json
// writes them, since re-encoding drops insignificant whitespace and escapes
// characters such as '&' that the original may have written plainly.
func compact(t *testing.T, review *admissionv1.AdmissionReview) *admissionv1.AdmissionReview {
	out := review.DeepCopy()
	if r := out.Request; r != nil {
		for _, ext := range []*runtime.RawExtension{&r.Object, &r.OldObject, &r.Options} {
			if len(ext.Raw) > 0 {
				var v any
				if err := json.Unmarshal(ext.Raw, &v); err != nil {
					t.Fatal(err)
				}
				raw, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				ext.Raw = raw
			}
		}
	}
	return out
}
