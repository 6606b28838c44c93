package server

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPeekAdmissionUID(t *testing.T) {
	big := `"object":{"data":"` + strings.Repeat("x", 2*ShedPeekBytes) + `"},`
	for _, tt := range []struct {
		name string
		body string
		want string // "" means none found
	}{
		{"as the apiserver encodes it", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"a-b","kind":{"kind":"Node"}}}`, "a-b"},
		{"cut short after the UID", `{"kind":"AdmissionReview","request":{"uid":"a-b","object":{"metadata":{"name":`, "a-b"},
		{"after nested values", `{"x":[1,{"y":[2,3]}],"request":{"kind":{"group":""},"uid":"c"}}`, "c"},
		{"UID beyond the head", `{"request":{` + big + `"uid":"late"}}`, ""},
		{"no request", `{"kind":"AdmissionReview"}`, ""},
		{"request without UID", `{"request":{"name":"n"}}`, ""},
		{"empty UID", `{"request":{"uid":""}}`, ""},
		{"UID not a string", `{"request":{"uid":7}}`, ""},
		{"request not an object", `{"request":"uid"}`, ""},
		{"not an object", `["request"]`, ""},
		{"not JSON", `request uid`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := peekAdmissionUID(io.LimitReader(strings.NewReader(tt.body), ShedPeekBytes))
			if got != tt.want || ok != (tt.want != "") {
				t.Fatalf("peekAdmissionUID = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

func TestShedAdmissionReview(t *testing.T) {
	body, ok := ShedAdmissionReview(strings.NewReader(`{"request":{"uid":"u"}}`), "overloaded")
	if !ok {
		t.Fatal("no answer for a review with a UID")
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		t.Fatal(err)
	}
	want := admissionv1.AdmissionResponse{UID: types.UID("u"), Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: 429, Reason: metav1.StatusReasonTooManyRequests, Message: "overloaded"}}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Response == nil ||
		review.Response.UID != want.UID || review.Response.Allowed || *review.Response.Result != *want.Result {
		t.Fatalf("answer = %s", body)
	}
	if _, ok := ShedAdmissionReview(strings.NewReader(`{}`), "overloaded"); ok {
		t.Fatal("an answer without a UID, which the apiserver would refuse")
	}
}

func FuzzPeekAdmissionUID(f *testing.F) {
	f.Add([]byte(`{"request":{"uid":"a"}}`))
	f.Add([]byte(`{"x":[{"request":{"uid":"b"}}],"request":{"uid":"c"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		uid, ok := peekAdmissionUID(io.LimitReader(strings.NewReader(string(body)), ShedPeekBytes))
		if ok != (uid != "") {
			t.Fatalf("peekAdmissionUID = %q, %v", uid, ok)
		}
	})
}
