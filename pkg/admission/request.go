package admission

import (
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/json"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// Request is an AdmissionRequest with its objects decoded once, into the
// API types the rules read: the /validate handler decodes, the rules only
// read.
type Request struct {
	*admissionv1.AdmissionRequest
	// Obj and OldObj are request.object and request.oldObject decoded
	// (a *corev1.Node for nodes, a *corev1.ConfigMap for configmaps, ...;
	// see objectKindOf), nil when the review carries none. An object no
	// rule reads is a generic JSON value, decoded only to hold it to the
	// repeated-key rule.
	Obj, OldObj any
}

// DecodeRequest decodes the objects and options of req. An error means a
// review that is answered but never decided: an object that is not of its
// resource's type, or a key repeated anywhere (the apiserver never repeats
// one, and a reader that kept the first value would see another request
// than one that kept the last).
func DecodeRequest(req *admissionv1.AdmissionRequest) (*Request, error) {
	kind := objectKindOf(req)
	r := &Request{AdmissionRequest: req}
	var err error
	if r.Obj, err = decodeEmbedded(req.Object.Raw, "object", kind); err != nil {
		return nil, err
	}
	if r.OldObj, err = decodeEmbedded(req.OldObject.Raw, "oldObject", kind); err != nil {
		return nil, err
	}
	if _, err = decodeEmbedded(req.Options.Raw, "options", anyJSON); err != nil {
		return nil, err
	}
	return r, nil
}

// objectKind is the API type of a request's objects.
type objectKind struct {
	// name names the type in errors.
	name string
	// new returns a value to decode into; nil for a generic JSON value.
	new func() any
	// unknownFields refuses a field this build does not know.
	unknownFields bool
}

// anyJSON is the kind of an object no rule reads.
var anyJSON = objectKind{name: "JSON value"}

func kindOf[T any](name string) objectKind {
	return objectKind{name: name, new: func() any { return new(T) }}
}

// objectKindOf is the type of req's objects where a rule reads them.
func objectKindOf(req *admissionv1.AdmissionRequest) objectKind {
	sub := req.SubResource
	switch (schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}) {
	case nodesResource:
		if sub == "" || sub == "status" {
			return kindOf[corev1.Node]("Node")
		}
	case configMapsResource:
		if sub == "" {
			return kindOf[corev1.ConfigMap]("ConfigMap")
		}
	case rolloutsResource:
		if sub == "" {
			// The webhook and the CRD ship together, so a field this build
			// does not know is a typo (or a rollout it would misjudge),
			// never a newer apiserver's addition.
			k := kindOf[v1alpha1.KubeletConfigRollout]("KubeletConfigRollout")
			k.unknownFields = true
			return k
		}
	case podsResource:
		switch sub {
		case "", "status":
			return kindOf[corev1.Pod]("Pod")
		case "eviction":
			return kindOf[policyv1.Eviction]("Eviction")
		}
	case pvcsResource:
		return kindOf[corev1.PersistentVolumeClaim]("PersistentVolumeClaim")
	case serviceAccountsResource:
		if sub == "token" {
			return kindOf[authenticationv1.TokenRequest]("TokenRequest")
		}
	case leasesResource:
		return kindOf[coordinationv1.Lease]("Lease")
	case csiNodesResource:
		return kindOf[storagev1.CSINode]("CSINode")
	case resourceSlicesResource:
		return kindOf[resourcev1.ResourceSlice]("ResourceSlice")
	case csrsResource:
		return kindOf[certificatesv1.CertificateSigningRequest]("CertificateSigningRequest")
	case podCertificateRequestsResource:
		return kindOf[certificatesv1.PodCertificateRequest]("PodCertificateRequest")
	}
	return anyJSON
}

// decodeEmbedded decodes one embedded object of the review as kind says,
// case-sensitively as the apiserver does; nil raw gives nil. Fields this
// build does not know are let through (a newer apiserver may send them),
// except where kind refuses them.
func decodeEmbedded(raw []byte, which string, kind objectKind) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var obj any = new(any)
	opts := []json.StrictOption{json.DisallowDuplicateFields}
	if kind.new != nil {
		obj = kind.new()
	}
	if kind.unknownFields {
		opts = append(opts, json.DisallowUnknownFields)
	}
	strict, err := json.UnmarshalStrict(raw, obj, opts...)
	switch {
	case err != nil:
		return nil, fmt.Errorf("decoding the %s as a %s: %w", which, kind.name, err)
	case len(strict) > 0 && kind.unknownFields:
		return nil, fmt.Errorf("decoding the %s as a %s: %w", which, kind.name, errors.Join(strict...))
	case len(strict) > 0:
		return nil, fmt.Errorf("the review repeats a key: request.%s: %w", which, errors.Join(strict...))
	}
	return obj, nil
}

// required is the decoded object of a rule that cannot judge without it.
func required[T any](obj any, which string) (*T, error) {
	if t, ok := obj.(*T); ok && t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("the review carries no %s", which)
}
