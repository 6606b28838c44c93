package admission

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/nodeguard/nodeguard/internal/fastjson"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// decodeNode decodes the fields of a Node the rules read: name, the
// assignment annotation (the only annotation a rule reads),
// ownerReferences, taints, the legacy configSource and, when needStatus,
// the kubelet version. nil raw gives nil. The labels are left as written
// (rawLabels, "" when absent) for decodeLabels: a kubelet's updates leave
// them as they were, and comparing their text spares building two maps.
//
// A status update, the most frequent request in a cluster, is mostly
// images, conditions and managed fields that no rule reads; gjson finds the
// few values that matter without building, or even scanning, the rest, and
// each value found is then decoded strictly into its API type.
func decodeNode(raw runtime.RawExtension, which string, needStatus bool) (n *corev1.Node, rawLabels string, err error) {
	if len(raw.Raw) == 0 {
		return nil, "", nil
	}
	d := fieldDecoder{which: which, kind: "Node"}
	root, err := d.parse(raw.Raw)
	if err != nil {
		return nil, "", err
	}
	n = &corev1.Node{}
	var seenMetadata, seenSpec bool
	// One pass over the top level and one over metadata and spec: a
	// missing key (ownerReferences, usually) must not cost a rescan of the
	// managed fields. The top-level walk stops once it has what the rules
	// read: ReviewFunc refuses a review whose objects repeat a key there.
	d.each("", root, func(key string, value gjson.Result) bool {
		switch key {
		case "metadata":
			seenMetadata = true
			d.each("metadata", value, func(k string, v gjson.Result) bool {
				switch k {
				case "name":
					return d.string("metadata.name", v, &n.Name)
				case "labels":
					rawLabels = v.Raw
				case "annotations":
					return d.stringMapOf("metadata.annotations", v, &n.Annotations, isAssignmentAnnotation)
				case "ownerReferences":
					return d.json("metadata.ownerReferences", v, &n.OwnerReferences)
				}
				return true
			})
		case "spec":
			seenSpec = true
			d.each("spec", value, func(k string, v gjson.Result) bool {
				switch k {
				case "taints":
					return d.json("spec.taints", v, &n.Spec.Taints)
				case "configSource":
					return d.json("spec.configSource", v, &n.Spec.ConfigSource)
				}
				return true
			})
		case "status":
			if needStatus {
				needStatus = false
				if v := value.Get("nodeInfo.kubeletVersion"); v.Exists() {
					d.json("status.nodeInfo.kubeletVersion", v, &n.Status.NodeInfo.KubeletVersion)
				}
			}
		}
		return d.err == nil && !(seenMetadata && seenSpec && !needStatus)
	})
	if d.err != nil {
		return nil, "", d.err
	}
	return n, rawLabels, nil
}

func isAssignmentAnnotation(key string) bool { return key == contract.ConfigSourceAnnotation }

// decodeLabels decodes the labels decodeNode left as written; "" (absent)
// gives nil.
func decodeLabels(rawLabels, which string) (map[string]string, error) {
	if rawLabels == "" {
		return nil, nil
	}
	d := fieldDecoder{which: which, kind: "Node"}
	var labels map[string]string
	d.stringMap("metadata.labels", gjson.Parse(rawLabels), &labels)
	return labels, d.err
}

// configMapFields is what the rules read of a ConfigMap.
type configMapFields struct {
	name, namespace string
	labels          map[string]string
	// quotedConfig is data[contract.ConfigMapKey] as the review writes it,
	// a JSON string literal (see kubeletconfig.Checker.CheckQuoted); empty
	// when the key is absent.
	quotedConfig string
	binaryData   map[string][]byte
}

// decodeConfigMap decodes the fields of a ConfigMap the rules read: name,
// namespace, labels, the configuration under contract.ConfigMapKey (left
// quoted) and binaryData; nil raw gives nil. Every data value must be a
// string, as for encoding/json, but only the configuration is kept.
func decodeConfigMap(raw runtime.RawExtension, which string) (*configMapFields, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	d := fieldDecoder{which: which, kind: "ConfigMap"}
	root, err := d.parse(raw.Raw)
	if err != nil {
		return nil, err
	}
	cm := &configMapFields{}
	d.each("", root, func(key string, value gjson.Result) bool {
		switch key {
		case "metadata":
			d.each("metadata", value, func(k string, v gjson.Result) bool {
				switch k {
				case "name":
					return d.string("metadata.name", v, &cm.name)
				case "namespace":
					return d.string("metadata.namespace", v, &cm.namespace)
				case "labels":
					return d.stringMap("metadata.labels", v, &cm.labels)
				}
				return true
			})
		case "data":
			return d.quotedStrings("data", value, func(k, quoted string) {
				if k == contract.ConfigMapKey {
					cm.quotedConfig = quoted
				}
			})
		case "binaryData":
			return d.json("binaryData", value, &cm.binaryData)
		}
		return d.err == nil
	})
	if d.err != nil {
		return nil, d.err
	}
	return cm, nil
}

// checkConfig checks the configuration the ConfigMap holds, by its quoted
// text. The error is about the ConfigMap (no such key); the outcome's Err
// is about the content.
func (cm *configMapFields) checkConfig(configs *kubeletconfig.Checker) (*kubeletconfig.Checked, error) {
	if cm.quotedConfig == "" {
		_, binary := cm.binaryData[contract.ConfigMapKey]
		return nil, kubeletconfig.MissingKeyError(cm.namespace, cm.name, contract.ConfigMapKey, binary)
	}
	return configs.CheckQuoted(cm.quotedConfig)
}

// fieldDecoder reads single fields of an object with gjson, each decoded
// as encoding/json would; the first error sticks.
type fieldDecoder struct {
	which, kind string
	err         error
}

func (d *fieldDecoder) parse(raw []byte) (gjson.Result, error) {
	// gjson only reads the string; viewing the bytes as one avoids copying
	// the whole object.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw)))
	if !root.IsObject() {
		return root, fmt.Errorf("decoding %s as a %s: not a JSON object", d.which, d.kind)
	}
	return root, nil
}

func (d *fieldDecoder) fail(path string, format string, args ...any) bool {
	if d.err == nil {
		d.err = fmt.Errorf("decoding %s as a %s: %s: %s", d.which, d.kind, path, fmt.Sprintf(format, args...))
	}
	return false
}

// json decodes one value reflectively, for the rarer, structured fields.
func (d *fieldDecoder) json(path string, v gjson.Result, target any) bool {
	if d.err != nil {
		return false
	}
	if err := utiljson.Unmarshal([]byte(v.Raw), target); err != nil {
		d.err = fmt.Errorf("decoding %s as a %s: %s: %w", d.which, d.kind, path, err)
		return false
	}
	return true
}

// needsReference reports whether a JSON string is one whose decoding has
// corner cases best left to encoding/json, the reference: \u escapes
// (invalid surrogates) and invalid UTF-8 (replaced with U+FFFD there, kept
// as is by gjson).
func needsReference(raw string) bool {
	return strings.Contains(raw, `\u`) || !utf8.ValidString(raw)
}

// each walks an object's fields with their keys decoded. A repeated key is
// an error: encoding/json would merge or overwrite, and two readers of the
// same object must never see different values. The apiserver never
// repeats a key.
func (d *fieldDecoder) each(path string, v gjson.Result, field func(key string, value gjson.Result) bool) {
	if !v.IsObject() {
		// Left to the caller's type checks; only objects have fields.
		return
	}
	var seen fastjson.KeySet
	v.ForEach(func(key, value gjson.Result) bool {
		k := key.Str
		if needsReference(key.Raw) {
			// Its own variable: taking k's address would move every
			// key to the heap.
			var decoded string
			if !d.json(path, key, &decoded) {
				return false
			}
			k = decoded
		}
		if seen.Repeated(k) {
			return d.fail(path, "repeated key %q", k)
		}
		return field(k, value) && d.err == nil
	})
}

// string reads a string directly; null leaves it empty, as encoding/json
// does. Strings needsReference picks go through encoding/json.
func (d *fieldDecoder) string(path string, v gjson.Result, target *string) bool {
	switch v.Type {
	case gjson.Null:
		return true
	case gjson.String:
		if needsReference(v.Raw) {
			return d.json(path, v, target)
		}
		*target = v.Str
		return true
	}
	return d.fail(path, "want a string, got %s", v.Type)
}

// quotedStrings walks an object of strings (null is empty), handing over
// each value as written, without unquoting it: gjson would unquote every
// value of the object (4 KiB each for a ConfigMap's data).
func (d *fieldDecoder) quotedStrings(path string, v gjson.Result, value func(key, quoted string)) bool {
	if v.Type == gjson.Null {
		return true
	}
	if !v.IsObject() {
		return d.fail(path, "want an object of strings, got %s", v.Type)
	}
	var seen fastjson.KeySet
	valid := fastjson.Members(v.Raw, func(key string, escaped bool, quoted string) bool {
		if escaped || !utf8.ValidString(key) {
			if !d.json(path, gjson.Result{Type: gjson.String, Raw: `"` + key + `"`}, &key) {
				return false
			}
		}
		if seen.Repeated(key) {
			return d.fail(path, "repeated key %q", key)
		}
		if quoted[0] != '"' {
			return d.fail(path+"["+key+"]", "want a string, got %s", gjson.Parse(quoted).Type)
		}
		value(key, quoted)
		return true
	})
	if !valid {
		return d.fail(path, "not valid JSON")
	}
	return d.err == nil
}

func (d *fieldDecoder) stringMap(path string, v gjson.Result, target *map[string]string) bool {
	return d.stringMapOf(path, v, target, nil)
}

// stringMapOf reads an object of strings, keeping only the members keep
// (nil: all) accepts; every member is still checked. Nothing kept gives
// nil.
func (d *fieldDecoder) stringMapOf(path string, v gjson.Result, target *map[string]string, keep func(key string) bool) bool {
	if v.Type == gjson.Null {
		return true
	}
	if !v.IsObject() {
		return d.fail(path, "want an object of strings, got %s", v.Type)
	}
	var m map[string]string
	if keep == nil {
		m = make(map[string]string)
	}
	d.each(path, v, func(k string, value gjson.Result) bool {
		if value.Type != gjson.String {
			return d.fail(path+"["+k+"]", "want a string, got %s", value.Type)
		}
		if keep != nil && !keep(k) {
			return true
		}
		// The member's path is built only for the rare value that needs
		// encoding/json: concatenating it for every label was a tenth of
		// reading a Node.
		val := value.Str
		if needsReference(value.Raw) && !d.json(path+"["+k+"]", value, &val) {
			return false
		}
		if m == nil {
			m = make(map[string]string, 1)
		}
		m[k] = val
		return true
	})
	*target = m
	return d.err == nil
}
