package authz

import (
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/tidwall/gjson"
)

// errSlowPath sends a review the fast decoder does not handle to the
// reflective one, which has the final word on what is malformed.
var errSlowPath = errors.New("not a canonical review")

// decodeReview decodes a SubjectAccessReview's apiVersion, kind and spec.
//
// Decoding with encoding/json's reflection was over half of /authorize's
// cost, most of it growing the stack of the fresh goroutine each HTTP/2
// request runs on. Reviews as the apiserver writes them (strings where
// strings belong) are read directly with gjson; anything else goes
// through k8s.io/apimachinery's case-sensitive decoder, so both paths
// agree on every input (FuzzDecodeReview checks it).
func decodeReview(body []byte) (sarRequest, error) {
	if sar, err := decodeReviewFast(body); err == nil {
		return sar, nil
	}
	var sar sarRequest
	if err := utiljson.Unmarshal(body, &sar); err != nil {
		return sarRequest{}, err
	}
	return sar, nil
}

func decodeReviewFast(body []byte) (sar sarRequest, err error) {
	if !gjson.ValidBytes(body) {
		return sar, errSlowPath
	}
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	if !root.IsObject() {
		return sar, errSlowPath
	}
	d := fastDecoder{}
	d.object(root, func(key string, value gjson.Result) {
		switch key {
		case "apiVersion":
			sar.APIVersion = d.str(value)
		case "kind":
			sar.Kind = d.str(value)
		case "spec":
			d.spec(value, &sar.Spec)
		}
	})
	if d.failed {
		return sarRequest{}, errSlowPath
	}
	return sar, nil
}

// fastDecoder reads the canonical shapes; failed turns true at the first
// value of another shape, which sends the review to the slow path.
type fastDecoder struct{ failed bool }

func (d *fastDecoder) fail() { d.failed = true }

func (d *fastDecoder) str(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		// Escapes and invalid UTF-8 have corner cases (lone surrogates,
		// replacement characters) best left to encoding/json.
		if strings.IndexByte(v.Raw, '\\') >= 0 || !utf8.ValidString(v.Str) {
			d.fail()
			return ""
		}
		return v.Str
	case gjson.Null:
		return ""
	}
	d.fail()
	return ""
}

func (d *fastDecoder) strings(v gjson.Result) []string {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		d.fail()
		return nil
	}
	out := []string{}
	v.ForEach(func(_, item gjson.Result) bool {
		if item.Type != gjson.String {
			d.fail()
			return false
		}
		out = append(out, item.Str)
		return true
	})
	return out
}

// object walks an object's fields. A repeated key fails: encoding/json
// merges a repeated struct-valued field into the first, which only the slow
// path reproduces; the apiserver never repeats keys.
func (d *fastDecoder) object(v gjson.Result, field func(key string, value gjson.Result)) bool {
	if v.Type == gjson.Null {
		return false
	}
	if !v.IsObject() {
		d.fail()
		return false
	}
	var seenBuf [16]string
	seen := seenBuf[:0]
	v.ForEach(func(key, value gjson.Result) bool {
		if strings.IndexByte(key.Raw, '\\') >= 0 || slices.Contains(seen, key.Str) {
			d.fail()
			return false
		}
		seen = append(seen, key.Str)
		field(key.Str, value)
		return !d.failed
	})
	return !d.failed
}

func (d *fastDecoder) spec(v gjson.Result, spec *authorizationv1.SubjectAccessReviewSpec) {
	d.object(v, func(key string, value gjson.Result) {
		switch key {
		case "user":
			spec.User = d.str(value)
		case "uid":
			spec.UID = d.str(value)
		case "groups":
			spec.Groups = d.strings(value)
		case "extra":
			spec.Extra = nil
			d.object(value, func(k string, v gjson.Result) {
				if spec.Extra == nil {
					spec.Extra = map[string]authorizationv1.ExtraValue{}
				}
				spec.Extra[k] = d.strings(v)
			})
			if spec.Extra == nil && value.IsObject() {
				spec.Extra = map[string]authorizationv1.ExtraValue{}
			}
		case "resourceAttributes":
			ra := &authorizationv1.ResourceAttributes{}
			if d.resourceAttributes(value, ra) {
				spec.ResourceAttributes = ra
			} else {
				spec.ResourceAttributes = nil
			}
		case "nonResourceAttributes":
			nra := &authorizationv1.NonResourceAttributes{}
			if d.object(value, func(k string, v gjson.Result) {
				switch k {
				case "path":
					nra.Path = d.str(v)
				case "verb":
					nra.Verb = d.str(v)
				}
			}) {
				spec.NonResourceAttributes = nra
			} else {
				spec.NonResourceAttributes = nil
			}
		}
	})
}

func (d *fastDecoder) resourceAttributes(v gjson.Result, ra *authorizationv1.ResourceAttributes) bool {
	return d.object(v, func(key string, value gjson.Result) {
		switch key {
		case "namespace":
			ra.Namespace = d.str(value)
		case "verb":
			ra.Verb = d.str(value)
		case "group":
			ra.Group = d.str(value)
		case "version":
			ra.Version = d.str(value)
		case "resource":
			ra.Resource = d.str(value)
		case "subresource":
			ra.Subresource = d.str(value)
		case "name":
			ra.Name = d.str(value)
		case "fieldSelector":
			ra.FieldSelector = nil
			var sel authorizationv1.FieldSelectorAttributes
			if d.selector(value, &sel.RawSelector, func(k, op string, values []string) {
				sel.Requirements = append(sel.Requirements, metav1.FieldSelectorRequirement{Key: k, Operator: selection(op), Values: values})
			}) {
				ra.FieldSelector = &sel
			}
		case "labelSelector":
			ra.LabelSelector = nil
			var sel authorizationv1.LabelSelectorAttributes
			if d.selector(value, &sel.RawSelector, func(k, op string, values []string) {
				sel.Requirements = append(sel.Requirements, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOperator(op), Values: values})
			}) {
				ra.LabelSelector = &sel
			}
		}
	})
}

func selection(op string) metav1.FieldSelectorOperator { return metav1.FieldSelectorOperator(op) }

// selector reads a field or label selector: its raw form and its
// requirements, each handed to add.
func (d *fastDecoder) selector(v gjson.Result, raw *string, add func(key, op string, values []string)) bool {
	return d.object(v, func(k string, value gjson.Result) {
		switch k {
		case "rawSelector":
			*raw = d.str(value)
		case "requirements":
			if value.Type == gjson.Null {
				return
			}
			if !value.IsArray() {
				d.fail()
				return
			}
			value.ForEach(func(_, item gjson.Result) bool {
				var key, op string
				var values []string
				if !d.object(item, func(rk string, rv gjson.Result) {
					switch rk {
					case "key":
						key = d.str(rv)
					case "operator":
						op = d.str(rv)
					case "values":
						values = d.strings(rv)
					}
				}) {
					d.fail()
					return false
				}
				add(key, op, values)
				return !d.failed
			})
		}
	})
}
