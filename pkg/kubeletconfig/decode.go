package kubeletconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// MaxConfigBytes is the largest configuration Decode reads. The apiserver caps
// a whole ConfigMap at 1 MiB; the same cap here protects callers that read
// configurations from elsewhere (files, checkpoints, plugins).
const MaxConfigBytes = 1 << 20

var (
	// ErrEmpty is returned for a configuration with no content.
	ErrEmpty = errors.New("configuration is empty")
	// ErrTooLarge is returned for a configuration over MaxConfigBytes.
	ErrTooLarge = errors.New("configuration is too large")
	// ErrNoKey is returned for a ConfigMap without the configuration key.
	ErrNoKey = errors.New("ConfigMap has no kubelet configuration key")
)

var errNilConfig = errors.New("no KubeletConfiguration given")

// kubeletConfigurationGVK is the only type Decode accepts.
var kubeletConfigurationGVK = kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")

// loadDecoder builds the strict decoder once, on first use.
var loadDecoder = sync.OnceValues(func() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s: %w", kubeletconfigv1beta1.SchemeGroupVersion, err)
	}
	options := serializerjson.SerializerOptions{Strict: true}
	return serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme, scheme, options), nil
})

// Decode strictly decodes a KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
// written as YAML or JSON. Unknown and duplicate fields, values of the wrong
// type, a missing or different apiVersion or kind, more than one YAML document,
// empty input and input over MaxConfigBytes are errors whose messages name the
// offending field. The result is not defaulted: fields left out stay zero (see
// the package documentation).
func Decode(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxConfigBytes)
	}
	content := bytes.TrimSpace(data)
	if len(content) == 0 {
		return nil, ErrEmpty
	}
	decoder, err := loadDecoder()
	if err != nil {
		return nil, err
	}
	// Input that starts like JSON is JSON, as for the kubelet's own decoder.
	// YAML is converted once, strictly (duplicate keys are errors), and then
	// decoded like JSON; the YAML serializer would parse it twice.
	if content[0] != '{' {
		if err := requireSingleDocument(data); err != nil {
			return nil, err
		}
		converted, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			return nil, fmt.Errorf("decoding KubeletConfiguration: %w", err)
		}
		if !bytes.HasPrefix(converted, []byte("{")) && !bytes.Equal(converted, []byte("null")) {
			return nil, errors.New("decoding KubeletConfiguration: the configuration must be a mapping of fields, with apiVersion and kind")
		}
		data = converted
	}

	return decodeWithSerializer(decoder, data)
}

// decodeWithSerializer decodes with k8s.io/apimachinery's strict JSON
// serializer.
func decodeWithSerializer(decoder runtime.Decoder, data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	obj, gvk, err := decoder.Decode(data, nil, nil)
	if gvk == nil {
		// The input did not even parse far enough to read apiVersion and kind.
		return nil, fmt.Errorf("decoding KubeletConfiguration: %w", err)
	}
	if typeErrs := checkTypeMeta(*gvk); len(typeErrs) > 0 {
		return nil, typeErrs.ToAggregate()
	}
	if err != nil {
		return nil, fmt.Errorf("decoding KubeletConfiguration: %w", err)
	}
	cfg, ok := obj.(*kubeletconfigv1beta1.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("decoding KubeletConfiguration: got %T", obj)
	}
	return cfg, nil
}

// checkTypeMeta names what is wrong with apiVersion and kind, instead of the
// decoder's messages, which quote the whole input or the scheme's internals.
func checkTypeMeta(gvk schema.GroupVersionKind) field.ErrorList {
	var errs field.ErrorList
	apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
	wantAPIVersion := kubeletconfigv1beta1.SchemeGroupVersion.String()
	switch {
	case gvk.Version == "":
		errs = append(errs, field.Required(field.NewPath("apiVersion"), fmt.Sprintf("must be %q", wantAPIVersion)))
	case apiVersion != wantAPIVersion:
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), apiVersion, []string{wantAPIVersion}))
	}
	switch {
	case kind == "":
		errs = append(errs, field.Required(field.NewPath("kind"), fmt.Sprintf("must be %q", kubeletConfigurationGVK.Kind)))
	case kind != kubeletConfigurationGVK.Kind:
		errs = append(errs, field.NotSupported(field.NewPath("kind"), kind, []string{kubeletConfigurationGVK.Kind}))
	}
	return errs
}

// requireSingleDocument refuses a YAML stream with more than one document: the
// decoder would silently read the first and drop the rest.
func requireSingleDocument(data []byte) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	documents := 0
	for {
		document, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("splitting YAML documents: %w", err)
		}
		if hasYAMLContent(document) {
			documents++
		}
	}
	if documents > 1 {
		return fmt.Errorf("configuration holds %d YAML documents, want exactly one KubeletConfiguration", documents)
	}
	return nil
}

// hasYAMLContent reports whether a document holds anything but blank lines,
// comments and document markers.
func hasYAMLContent(document []byte) bool {
	for line := range bytes.Lines(document) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' || bytes.Equal(line, []byte("---")) || bytes.Equal(line, []byte("...")) {
			continue
		}
		return true
	}
	return false
}

// DecodeConfigMap decodes the configuration a ConfigMap holds under the data
// key contract.ConfigMapKey.
func DecodeConfigMap(cm *corev1.ConfigMap) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	return DecodeConfigMapKey(cm, contract.ConfigMapKey)
}

// DecodeConfigMapKey decodes the configuration a ConfigMap holds under a data
// key of the caller's choosing, for legacy spec.configSource assignments that
// name their own kubeletConfigKey. Errors name the ConfigMap and the key.
func DecodeConfigMapKey(cm *corev1.ConfigMap, key string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	data, err := configMapData(cm, key)
	if err != nil {
		return nil, err
	}
	cfg, err := Decode([]byte(data))
	if err != nil {
		return nil, ConfigMapError(cm.Namespace, cm.Name, key, err)
	}
	return cfg, nil
}

// configMapData is the configuration text a ConfigMap holds under key.
func configMapData(cm *corev1.ConfigMap, key string) (string, error) {
	if cm == nil {
		return "", errors.New("no ConfigMap given")
	}
	data, ok := cm.Data[key]
	if !ok {
		_, binary := cm.BinaryData[key]
		return "", MissingKeyError(cm.Namespace, cm.Name, key, binary)
	}
	return data, nil
}

// MissingKeyError is the error for a ConfigMap whose data has no key, with a
// hint when the key is under binaryData instead.
func MissingKeyError(namespace, name, key string, inBinaryData bool) error {
	if inBinaryData {
		return fmt.Errorf("ConfigMap %s/%s: %w: %q is under binaryData, it must be under data", namespace, name, ErrNoKey, key)
	}
	return fmt.Errorf("ConfigMap %s/%s: %w: %s is missing", namespace, name, ErrNoKey, field.NewPath("data").Key(key))
}

// ConfigMapError names the ConfigMap and key an error about its content is
// about, as DecodeConfigMapKey's errors do.
func ConfigMapError(namespace, name, key string, err error) error {
	return fmt.Errorf("ConfigMap %s/%s %s: %w", namespace, name, field.NewPath("data").Key(key), err)
}
