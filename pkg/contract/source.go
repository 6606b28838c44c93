package contract

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ConfigMapRef names a ConfigMap: the word for a reference to a
// configuration everywhere (a KubeletConfigRollout's spec.configMapRef, an
// Assignment); ConfigMapVersion pins one version of it.
type ConfigMapRef struct {
	// namespace of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// String renders the reference the way the assignment annotation holds it.
func (r ConfigMapRef) String() string { return r.Namespace + "/" + r.Name }

// ParseConfigSource parses the value of ConfigSourceAnnotation. An empty value
// means "no assignment" and yields ok == false without error.
func ParseConfigSource(value string) (ref ConfigMapRef, ok bool, err error) {
	if value == "" {
		return ConfigMapRef{}, false, nil
	}
	namespace, name, found := strings.Cut(value, "/")
	if !found {
		return ConfigMapRef{}, false, fmt.Errorf("config source %q: want <namespace>/<name>", value)
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return ConfigMapRef{}, false, fmt.Errorf("config source %q: namespace: %s", value, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return ConfigMapRef{}, false, fmt.Errorf("config source %q: name: %s", value, strings.Join(msgs, "; "))
	}
	return ConfigMapRef{Namespace: namespace, Name: name}, true, nil
}

// Assignment is what a Node is assigned: a ConfigMap and the data key that
// holds the KubeletConfiguration in it.
type Assignment struct {
	ConfigMap ConfigMapRef
	Key       string
	// Legacy is true when the assignment comes from spec.configSource
	// (read-only compatibility) rather than the annotation.
	Legacy bool
}

// AssignmentOf reads a Node's assignment. The annotation wins; a legacy
// spec.configSource.configMap is read only when the annotation is absent.
// A malformed annotation is an error and, like an absent one, assigns
// nothing: ok is false.
func AssignmentOf(node *corev1.Node) (a Assignment, ok bool, err error) {
	if value, present := node.Annotations[ConfigSourceAnnotation]; present {
		ref, ok, err := ParseConfigSource(value)
		if !ok || err != nil {
			return Assignment{}, false, err
		}
		return Assignment{ConfigMap: ref, Key: ConfigMapKey}, true, nil
	}
	if src := node.Spec.ConfigSource; src != nil && src.ConfigMap != nil {
		cm := src.ConfigMap
		if cm.Namespace == "" || cm.Name == "" {
			return Assignment{}, false, fmt.Errorf("legacy spec.configSource.configMap needs namespace and name")
		}
		key := cm.KubeletConfigKey
		if key == "" {
			key = ConfigMapKey
		}
		return Assignment{ConfigMap: ConfigMapRef{Namespace: cm.Namespace, Name: cm.Name}, Key: key, Legacy: true}, true, nil
	}
	return Assignment{}, false, nil
}
