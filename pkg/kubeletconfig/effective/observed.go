package effective

import (
	"encoding/json"
	"errors"
	"fmt"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/disruption"
)

// Observed is what an agent learned of a running kubelet.
type Observed struct {
	// Config is the configuration the kubelet runs, as its /configz
	// serves it under "kubeletconfig" (ParseConfigz), JSON.
	Config []byte
	// Flags are the kubelet's command-line flags by name, as its /flagz
	// serves them (ParseFlagz): every flag, the ones not given with their
	// default. Nil when the kubelet does not serve /flagz (before 1.36,
	// or with the ComponentFlagz gate off).
	Flags map[string]string
	// Files are the kubelet's configuration files in the order it merges
	// them, its --config file first, as far as the agent could read them.
	Files []File
	// NotReadingOwn, when set, says why the kubelet does not read the
	// agent's own file (its --config or --config-dir, as /flagz shows, are
	// elsewhere): every difference is then put down to that.
	NotReadingOwn string
}

// File is one of the kubelet's configuration files.
type File struct {
	Path string
	// Data is the file's content now; nil when it does not exist.
	Data []byte
	// Own marks the file the agent writes.
	Own bool
	// DropIn is true for a file of the kubelet's --config-dir.
	DropIn bool
}

// ConfigzKey is the key /configz serves the kubelet's configuration under.
const ConfigzKey = "kubeletconfig"

// ParseConfigz returns the configuration in a kubelet's /configz answer,
// {"kubeletconfig": {...}}, as JSON with apiVersion and kind set (kubelets
// before 1.37 leave them out).
func ParseConfigz(body []byte) ([]byte, error) {
	if len(body) > kubeletconfig.MaxConfigBytes {
		return nil, fmt.Errorf("/configz: %w: %d bytes", kubeletconfig.ErrTooLarge, len(body))
	}
	var answer map[string]json.RawMessage
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("/configz: not a JSON object: %w", err)
	}
	raw, ok := answer[ConfigzKey]
	if !ok {
		return nil, fmt.Errorf("/configz: no %q in the answer", ConfigzKey)
	}
	fields, err := fieldMap(raw)
	if err != nil {
		return nil, fmt.Errorf("/configz: %q: %w", ConfigzKey, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("/configz: %q is empty", ConfigzKey)
	}
	fields["apiVersion"] = kubeletconfigv1beta1.SchemeGroupVersion.String()
	fields["kind"] = "KubeletConfiguration"
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	// What the kubelet serves must decode as a configuration: the
	// comparison rests on it.
	if _, err := disruption.DecodeLenient(out); err != nil {
		return nil, fmt.Errorf("/configz: %w", err)
	}
	return out, nil
}

// ParseFlagz reads a kubelet's structured /flagz answer (config.k8s.io
// v1beta1 or v1alpha1 Flagz, JSON): its flags by name.
func ParseFlagz(body []byte) (map[string]string, error) {
	var answer struct {
		Kind  string            `json:"kind"`
		Flags map[string]string `json:"flags"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("/flagz: %w", err)
	}
	if answer.Kind != "Flagz" {
		return nil, fmt.Errorf("/flagz: kind %q, want Flagz", answer.Kind)
	}
	if answer.Flags == nil {
		answer.Flags = map[string]string{}
	}
	return answer.Flags, nil
}

// FlagzAccept is the Accept header that asks /flagz for its structured form.
const FlagzAccept = "application/json;as=Flagz;v=v1beta1;g=config.k8s.io"

// fieldMap reads a configuration file's fields as the kubelet's merge sees
// them (kubeletconfig.FieldMap).
func fieldMap(data []byte) (map[string]any, error) { return kubeletconfig.FieldMap(data) }

// normalized is a configuration as its typed form writes it: decoded as the
// kubelet decodes it, defaulted with disruption.Defaulted when defaults is
// set, and encoded again, so that two spellings of one value (1m and
// 1m0s, 110 and an unset maxPods) read alike.
func normalized(data []byte, defaults bool) (map[string]any, error) {
	cfg, err := disruption.DecodeLenient(data)
	if err != nil {
		return nil, err
	}
	if defaults {
		cfg = disruption.Defaulted(cfg)
	}
	if cfg == nil {
		return map[string]any{}, nil
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	fields, err := fieldMap(out)
	if err != nil {
		return nil, err
	}
	if fields == nil {
		fields = map[string]any{}
	}
	return fields, nil
}

var errNoConfig = errors.New("the kubelet's running configuration is empty")
