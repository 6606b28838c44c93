package kubelet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// DefaultLocalFields are the fields taken from the node, never from a
// ConfigMap; see the package documentation for why each is here.
var DefaultLocalFields = []string{
	"providerID",
	"tlsCertFile",
	"tlsPrivateKeyFile",
	"staticPodPath",
	"containerRuntimeEndpoint",
	"imageServiceEndpoint",
	"resolvConf",
	"healthzBindAddress",
	"healthzPort",
	"authentication",
	"authorization",
}

// Renderer turns a configuration into the file the kubelet reads.
type Renderer struct {
	Mode Mode
	// LocalConfigFile is the node's own configuration (ModeConfig only).
	LocalConfigFile string
	// LocalFields are top-level field names kept from the node.
	LocalFields []string
}

// Validate checks the renderer's settings.
func (r Renderer) Validate() error {
	var errs []error
	switch r.Mode {
	case ModeConfig:
		if r.LocalConfigFile == "" {
			errs = append(errs, errors.New("the config mode needs a local configuration file"))
		}
	case ModeDropIn:
	default:
		errs = append(errs, fmt.Errorf("mode %q: want %q or %q", r.Mode, ModeConfig, ModeDropIn))
	}
	if err := CheckLocalFields(r.LocalFields); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckLocalFields refuses names that are not top-level KubeletConfiguration
// fields (or are apiVersion/kind), so that a typo does not silently let a
// ConfigMap set a node-local field.
func CheckLocalFields(names []string) error {
	known := topLevelFields()
	var unknown []string
	for _, name := range names {
		if !slices.Contains(known, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("local fields %s: not top-level KubeletConfiguration fields", strings.Join(unknown, ", "))
	}
	return nil
}

// topLevelFields lists the JSON names of KubeletConfiguration's own fields.
func topLevelFields() []string {
	typ := reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration]()
	var names []string
	for field := range typ.Fields() {
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if field.Anonymous || name == "" || name == "-" {
			continue
		}
		names = append(names, name)
	}
	return names
}

// Local renders the node's own configuration.
func (r Renderer) Local() (Rendered, error) {
	if r.Mode == ModeDropIn {
		return Rendered{Absent: true}, nil
	}
	data, err := os.ReadFile(r.LocalConfigFile)
	if err != nil {
		return Rendered{}, fmt.Errorf("reading the local kubelet configuration: %w", err)
	}
	return Rendered{Data: data}, nil
}

// Assigned renders a configuration from a ConfigMap (already decoded and
// validated by the caller) with the node-local fields applied.
func (r Renderer) Assigned(config []byte) (Rendered, error) {
	fields, err := toFieldMap(config)
	if err != nil {
		return Rendered{}, fmt.Errorf("reading the assigned configuration: %w", err)
	}
	switch r.Mode {
	case ModeDropIn:
		for _, name := range r.LocalFields {
			delete(fields, name)
		}
	default:
		localData, err := os.ReadFile(r.LocalConfigFile)
		if err != nil {
			return Rendered{}, fmt.Errorf("reading the local kubelet configuration for its node-local fields: %w", err)
		}
		local, err := toFieldMap(localData)
		if err != nil {
			return Rendered{}, fmt.Errorf("reading the local kubelet configuration %s: %w", r.LocalConfigFile, err)
		}
		for _, name := range r.LocalFields {
			if value, ok := local[name]; ok {
				fields[name] = value
			} else {
				delete(fields, name)
			}
		}
	}
	asJSON, err := json.Marshal(fields)
	if err != nil {
		return Rendered{}, fmt.Errorf("encoding the kubelet configuration: %w", err)
	}
	out, err := yaml.JSONToYAML(asJSON)
	if err != nil {
		return Rendered{}, fmt.Errorf("encoding the kubelet configuration: %w", err)
	}
	return Rendered{Data: append([]byte(ownedHeader), out...)}, nil
}

func toFieldMap(data []byte) (map[string]any, error) {
	fields, err := kubeletconfig.FieldMap(data)
	if err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, errors.New("the configuration is empty")
	}
	return fields, nil
}
