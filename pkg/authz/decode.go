package authz

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidwall/gjson"

	"github.com/nodeguard/nodeguard/internal/fastjson"
)

// decodeReview decodes a SubjectAccessReview's apiVersion, kind and spec:
// reviews as the apiserver writes them directly, any other reflectively
// (internal/fastjson); FuzzDecodeReview checks both paths agree.
func decodeReview(body []byte) (sarRequest, error) {
	return fastjson.Decode(body, func(r *fastjson.Reader, root gjson.Result, sar *sarRequest) {
		r.Object(root, func(key string, value gjson.Result) {
			switch key {
			case "apiVersion":
				sar.APIVersion = r.String(value)
			case "kind":
				sar.Kind = r.String(value)
			case "spec":
				readSpec(r, value, &sar.Spec)
			}
		})
	})
}

func readSpec(r *fastjson.Reader, v gjson.Result, spec *authorizationv1.SubjectAccessReviewSpec) {
	r.Object(v, func(key string, value gjson.Result) {
		switch key {
		case "user":
			spec.User = r.String(value)
		case "uid":
			spec.UID = r.String(value)
		case "groups":
			spec.Groups = r.Strings(value)
		case "extra":
			spec.Extra = fastjson.StringLists[authorizationv1.ExtraValue](r, value)
		case "resourceAttributes":
			spec.ResourceAttributes = nil
			ra := &authorizationv1.ResourceAttributes{}
			if readResourceAttributes(r, value, ra) {
				spec.ResourceAttributes = ra
			}
		case "nonResourceAttributes":
			spec.NonResourceAttributes = nil
			nra := &authorizationv1.NonResourceAttributes{}
			if r.Object(value, func(k string, v gjson.Result) {
				switch k {
				case "path":
					nra.Path = r.String(v)
				case "verb":
					nra.Verb = r.String(v)
				}
			}) {
				spec.NonResourceAttributes = nra
			}
		}
	})
}

func readResourceAttributes(r *fastjson.Reader, v gjson.Result, ra *authorizationv1.ResourceAttributes) bool {
	return r.Object(v, func(key string, value gjson.Result) {
		switch key {
		case "namespace":
			ra.Namespace = r.String(value)
		case "verb":
			ra.Verb = r.String(value)
		case "group":
			ra.Group = r.String(value)
		case "version":
			ra.Version = r.String(value)
		case "resource":
			ra.Resource = r.String(value)
		case "subresource":
			ra.Subresource = r.String(value)
		case "name":
			ra.Name = r.String(value)
		case "fieldSelector":
			ra.FieldSelector = nil
			var sel authorizationv1.FieldSelectorAttributes
			if readSelector(r, value, &sel.RawSelector, &sel.Requirements, func(k, op string, values []string) metav1.FieldSelectorRequirement {
				return metav1.FieldSelectorRequirement{Key: k, Operator: metav1.FieldSelectorOperator(op), Values: values}
			}) {
				ra.FieldSelector = &sel
			}
		case "labelSelector":
			ra.LabelSelector = nil
			var sel authorizationv1.LabelSelectorAttributes
			if readSelector(r, value, &sel.RawSelector, &sel.Requirements, func(k, op string, values []string) metav1.LabelSelectorRequirement {
				return metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOperator(op), Values: values}
			}) {
				ra.LabelSelector = &sel
			}
		}
	})
}

// readSelector reads a field or label selector: its raw form, and its
// requirements, each built by requirement. An empty array yields an empty,
// non-nil list, as encoding/json decodes it.
func readSelector[R any](r *fastjson.Reader, v gjson.Result, raw *string, requirements *[]R, requirement func(key, op string, values []string) R) bool {
	return r.Object(v, func(k string, value gjson.Result) {
		switch k {
		case "rawSelector":
			*raw = r.String(value)
		case "requirements":
			if value.Type == gjson.Null {
				return
			}
			if !value.IsArray() {
				r.Fail()
				return
			}
			*requirements = []R{}
			value.ForEach(func(_, item gjson.Result) bool {
				var key, op string
				var values []string
				if !r.Object(item, func(rk string, rv gjson.Result) {
					switch rk {
					case "key":
						key = r.String(rv)
					case "operator":
						op = r.String(rv)
					case "values":
						values = r.Strings(rv)
					}
				}) {
					r.Fail()
					return false
				}
				*requirements = append(*requirements, requirement(key, op, values))
				return !r.Failed()
			})
		}
	})
}
