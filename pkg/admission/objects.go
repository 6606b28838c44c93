package admission

import (
	"fmt"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"unsafe"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// decodeNode decodes the fields of a Node the rules read: name, labels,
// annotations, ownerReferences, taints, the legacy configSource and, when
// needStatus, the kubelet version. nil raw gives nil.
//
// A status update, the most frequent request in a cluster, is mostly
// images, conditions and managed fields that no rule reads; gjson finds the
// few values that matter without building, or even scanning, the rest, and
// each value found is then decoded strictly into its API type.
func decodeNode(raw runtime.RawExtension, which string, needStatus bool) (*corev1.Node, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	// gjson only reads the string; viewing the bytes as one avoids copying
	// the whole object.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(raw.Raw), len(raw.Raw)))
	if !root.IsObject() {
		return nil, fmt.Errorf("decoding %s as a Node: not a JSON object", which)
	}
	n := &corev1.Node{}
	var err error
	decode := func(path string, value gjson.Result, target any) bool {
		if err == nil {
			if e := utiljson.Unmarshal([]byte(value.Raw), target); e != nil {
				err = fmt.Errorf("decoding %s as a Node: %s: %w", which, path, e)
			}
		}
		return err == nil
	}
	var seenMetadata, seenSpec bool
	// One pass over the top level and one over metadata and spec: a
	// missing key (ownerReferences, usually) must not cost a rescan of the
	// managed fields.
	root.ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "metadata":
			seenMetadata = true
			value.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "name":
					return decodeString("metadata.name", v, &n.Name, &err, which)
				case "labels":
					return decodeStringMap("metadata.labels", v, &n.Labels, &err, which)
				case "annotations":
					return decodeStringMap("metadata.annotations", v, &n.Annotations, &err, which)
				case "ownerReferences":
					return decode("metadata.ownerReferences", v, &n.OwnerReferences)
				}
				return true
			})
		case "spec":
			seenSpec = true
			value.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "taints":
					return decode("spec.taints", v, &n.Spec.Taints)
				case "configSource":
					return decode("spec.configSource", v, &n.Spec.ConfigSource)
				}
				return true
			})
		case "status":
			if needStatus {
				needStatus = false
				if v := value.Get("nodeInfo.kubeletVersion"); v.Exists() {
					decode("status.nodeInfo.kubeletVersion", v, &n.Status.NodeInfo.KubeletVersion)
				}
			}
		}
		return err == nil && !(seenMetadata && seenSpec && !needStatus)
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// decodeString and decodeStringMap read the most common fields directly,
// which costs a fraction of a round through encoding/json.
func decodeString(path string, v gjson.Result, target *string, err *error, which string) bool {
	if v.Type != gjson.String {
		*err = fmt.Errorf("decoding %s as a Node: %s: want a string, got %s", which, path, v.Type)
		return false
	}
	*target = v.Str
	return true
}

func decodeStringMap(path string, v gjson.Result, target *map[string]string, err *error, which string) bool {
	if v.Type == gjson.Null {
		return true
	}
	if !v.IsObject() {
		*err = fmt.Errorf("decoding %s as a Node: %s: want an object of strings, got %s", which, path, v.Type)
		return false
	}
	m := make(map[string]string)
	v.ForEach(func(key, value gjson.Result) bool {
		if value.Type != gjson.String {
			*err = fmt.Errorf("decoding %s as a Node: %s[%s]: want a string, got %s", which, path, key.Str, value.Type)
			return false
		}
		m[key.Str] = value.Str
		return true
	})
	*target = m
	return *err == nil
}

// decodeConfigMap decodes a ConfigMap; nil raw gives nil.
func decodeConfigMap(raw runtime.RawExtension, which string) (*corev1.ConfigMap, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	cm := &corev1.ConfigMap{}
	if err := utiljson.Unmarshal(raw.Raw, cm); err != nil {
		return nil, fmt.Errorf("decoding %s as a ConfigMap: %w", which, err)
	}
	return cm, nil
}
