package kubeletconfig

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// FieldMap reads a configuration's fields as a map, YAML or JSON, without
// decoding them into the typed configuration: fields left out stay out
// (rather than becoming zero values), as the kubelet's merge of its files
// sees them, and numbers stay as written (an int64 beyond 2^53 does not
// round). Empty data is nil, without an error.
func FieldMap(data []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	decoder := json.NewDecoder(bytes.NewReader(asJSON))
	decoder.UseNumber()
	if err := decoder.Decode(&fields); err != nil {
		return nil, fmt.Errorf("want a mapping of fields: %w", err)
	}
	return fields, nil
}
