package admission

import (
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/json"
)

// decodeReview decodes an AdmissionReview case-sensitively, as the
// apiserver's own decoder does. Fields this build does not know are let
// through, since a newer apiserver may send them. A repeated key anywhere
// in the review, the objects it carries included, is not an error here but
// a refusal (repeated): the review is still answered, under its UID, but
// never decided, since a reader that kept the first value would see
// another request than one that kept the last.
func decodeReview(body []byte) (review *admissionv1.AdmissionReview, repeated error, err error) {
	review = &admissionv1.AdmissionReview{}
	strict, err := json.UnmarshalStrict(body, review, json.DisallowDuplicateFields)
	if err != nil {
		return nil, nil, err
	}
	if req := review.Request; req != nil {
		// The objects are raw JSON to the review's type; they are held to
		// the same rule, at any depth.
		for _, embedded := range []struct {
			name string
			raw  []byte
		}{{"request.object", req.Object.Raw}, {"request.oldObject", req.OldObject.Raw}, {"request.options", req.Options.Raw}} {
			if len(embedded.raw) == 0 {
				continue
			}
			var v any
			inner, err := json.UnmarshalStrict(embedded.raw, &v, json.DisallowDuplicateFields)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", embedded.name, err)
			}
			for _, e := range inner {
				strict = append(strict, fmt.Errorf("%s: %w", embedded.name, e))
			}
		}
	}
	return review, errors.Join(strict...), nil
}

// decodeObject decodes an object of the review into its API type, as
// decodeReview decodes the review, with any stricter options on top; nil
// raw gives nil.
func decodeObject[T any](raw runtime.RawExtension, which, kind string, stricter ...json.StrictOption) (*T, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	obj := new(T)
	strict, err := json.UnmarshalStrict(raw.Raw, obj, append([]json.StrictOption{json.DisallowDuplicateFields}, stricter...)...)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding the %s as a %s: %w", which, kind, err)
	}
	return obj, nil
}

func decodeNode(raw runtime.RawExtension, which string) (*corev1.Node, error) {
	return decodeObject[corev1.Node](raw, which, "Node")
}

func decodeConfigMap(raw runtime.RawExtension, which string) (*corev1.ConfigMap, error) {
	return decodeObject[corev1.ConfigMap](raw, which, "ConfigMap")
}

// decodePod decodes a pod of the review; a missing one is an error, since
// every pod rule reads one.
func decodePod(raw runtime.RawExtension, which string) (*corev1.Pod, error) {
	return decodeRequired[corev1.Pod](raw, which, "Pod")
}

// decodeRequired is decodeObject for an object the rule cannot judge
// without: a missing one is an error.
func decodeRequired[T any](raw runtime.RawExtension, which, kind string) (*T, error) {
	obj, err := decodeObject[T](raw, which, kind)
	if err == nil && obj == nil {
		err = fmt.Errorf("the review carries no %s", which)
	}
	return obj, err
}
