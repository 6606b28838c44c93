package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tidwall/gjson"

	"github.com/nodeguard/nodeguard/internal/fastjson"
)

// decodeReview decodes an AdmissionReview: reviews as the apiserver writes
// them directly (the objects stay raw JSON, read later only as far as the
// rules need), any other reflectively (internal/fastjson);
// FuzzDecodeAdmissionReview checks both paths agree. uniqueKeys reports
// that no object of the review's top levels (fastjson.Reader.UniqueKeys),
// nor of the objects it carries and their metadata, spec, status or data,
// repeats a key.
func decodeReview(body []byte) (review admissionv1.AdmissionReview, uniqueKeys bool, err error) {
	return fastjson.DecodeUnique(body, func(r *fastjson.Reader, root gjson.Result, review *admissionv1.AdmissionReview) {
		r.Object(root, func(key string, value gjson.Result) {
			switch key {
			case "apiVersion":
				review.APIVersion = r.String(value)
			case "kind":
				review.Kind = r.String(value)
			case "request":
				review.Request = nil
				req := &admissionv1.AdmissionRequest{}
				if readRequest(r, value, req) {
					review.Request = req
				}
			case "response", "metadata":
				// A request never carries these; leave them to the
				// reflective decoder.
				r.Fail()
			}
		})
	})
}

func readRequest(r *fastjson.Reader, v gjson.Result, req *admissionv1.AdmissionRequest) bool {
	return r.Object(v, func(key string, value gjson.Result) {
		switch key {
		case "uid":
			req.UID = types.UID(r.String(value))
		case "kind":
			readGVK(r, value, &req.Kind)
		case "resource":
			readGVR(r, value, &req.Resource)
		case "subResource":
			req.SubResource = r.String(value)
		case "requestKind":
			req.RequestKind = nil
			gvk := &metav1.GroupVersionKind{}
			if readGVK(r, value, gvk) {
				req.RequestKind = gvk
			}
		case "requestResource":
			req.RequestResource = nil
			gvr := &metav1.GroupVersionResource{}
			if readGVR(r, value, gvr) {
				req.RequestResource = gvr
			}
		case "requestSubResource":
			req.RequestSubResource = r.String(value)
		case "name":
			req.Name = r.String(value)
		case "namespace":
			req.Namespace = r.String(value)
		case "operation":
			req.Operation = admissionv1.Operation(r.String(value))
		case "userInfo":
			readUserInfo(r, value, &req.UserInfo)
		case "object":
			req.Object.Raw = r.Raw(value)
		case "oldObject":
			req.OldObject.Raw = r.Raw(value)
		case "options":
			req.Options.Raw = r.Raw(value)
		case "dryRun":
			req.DryRun = nil
			if value.Type != gjson.Null {
				b := r.Bool(value)
				req.DryRun = &b
			}
		}
	})
}

func readGVK(r *fastjson.Reader, v gjson.Result, gvk *metav1.GroupVersionKind) bool {
	return r.Object(v, func(key string, value gjson.Result) {
		switch key {
		case "group":
			gvk.Group = r.String(value)
		case "version":
			gvk.Version = r.String(value)
		case "kind":
			gvk.Kind = r.String(value)
		}
	})
}

func readGVR(r *fastjson.Reader, v gjson.Result, gvr *metav1.GroupVersionResource) bool {
	return r.Object(v, func(key string, value gjson.Result) {
		switch key {
		case "group":
			gvr.Group = r.String(value)
		case "version":
			gvr.Version = r.String(value)
		case "resource":
			gvr.Resource = r.String(value)
		}
	})
}

func readUserInfo(r *fastjson.Reader, v gjson.Result, u *authenticationv1.UserInfo) {
	r.Object(v, func(key string, value gjson.Result) {
		switch key {
		case "username":
			u.Username = r.String(value)
		case "uid":
			u.UID = r.String(value)
		case "groups":
			u.Groups = r.Strings(value)
		case "extra":
			u.Extra = fastjson.StringLists[authenticationv1.ExtraValue](r, value)
		}
	})
}
