package reviewtest

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Raw is obj encoded as an AdmissionRequest carries it; nil is empty.
func Raw(t testing.TB, obj any) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// The identities the tests write as.
var (
	N1User    = authenticationv1.UserInfo{Username: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	AdminUser = authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}
	// Exempt is the user the tests' settings exempt ("break-glass").
	Exempt = authenticationv1.UserInfo{Username: "break-glass"}
)

// Request is an admission request of the tests, in their terms.
type Request struct {
	User        authenticationv1.UserInfo
	Operation   admissionv1.Operation
	Resource    string
	Subresource string
	Name        string
	Object, Old any
}

// Build is the AdmissionRequest the apiserver would send, with UID uid-1;
// a ConfigMap's is in the namespace cfg.
func (r Request) Build(t testing.TB) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", UserInfo: r.User, Operation: r.Operation, Name: r.Name, SubResource: r.Subresource,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: r.Resource},
		Object:   Raw(t, r.Object), OldObject: Raw(t, r.Old),
	}
	if r.Resource == "configmaps" {
		req.Namespace = "cfg"
	}
	return req
}
