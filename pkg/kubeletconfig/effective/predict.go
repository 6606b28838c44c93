package effective

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// ErrOwnNotRead is returned by Predict when the kubelet does not read the
// agent's file (Observed.NotReadingOwn, or no Files entry is Own): a new
// content changes nothing it runs.
var ErrOwnNotRead = errors.New("the kubelet does not read the agent's file")

// Predict returns what the kubelet will run (JSON) once it restarts with
// the agent's file holding next (nil: the file removed), as obs shows the
// kubelet now: its running configuration, with every top-level field the
// agent's file sets now or will set taken from the files as the kubelet
// merges them (the files before the agent's, defaulted as the kubelet
// defaults its --config file, with next merged over them), except the
// fields a later drop-in sets or a command-line flag decides (/flagz shows
// the running value for a field the files would set otherwise), which keep
// their running value. The agent's file as it is now counts only for which
// fields it sets, so a file already rewritten but not yet read predicts
// the same.
func Predict(obs Observed, next []byte) ([]byte, error) {
	if obs.NotReadingOwn != "" {
		return nil, fmt.Errorf("%w: %s", ErrOwnNotRead, obs.NotReadingOwn)
	}
	own := -1
	for i, f := range obs.Files {
		if f.Own {
			own = i
		}
	}
	if own < 0 {
		return nil, ErrOwnNotRead
	}
	running, err := fieldMap(obs.Config)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the kubelet's running configuration: %w", err)
	case running == nil:
		return nil, errNoConfig
	}
	lower, err := mergedFiles(obs.Files[:own])
	if err != nil {
		return nil, err
	}
	lowerFields, err := normalized(lower, true)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's files before the agent's: %w", err)
	}
	later := map[string]bool{}
	for _, f := range obs.Files[own+1:] {
		fields, _ := fieldMap(f.Data)
		for name := range fields {
			later[name] = true
		}
	}
	nowAll, err := mergedFiles(obs.Files)
	if err != nil {
		return nil, err
	}
	filesNow, err := normalized(nowAll, true)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's files: %w", err)
	}
	runningNorm, err := normalized(obs.Config, false)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's running configuration: %w", err)
	}
	oldOwn, _ := fieldMap(obs.Files[own].Data)
	newOwn, err := fieldMap(next)
	if err != nil {
		return nil, fmt.Errorf("the agent's new file: %w", err)
	}
	names := map[string]bool{}
	for name := range oldOwn {
		names[name] = true
	}
	for name := range newOwn {
		names[name] = true
	}
	delete(names, "apiVersion")
	delete(names, "kind")

	predicted := maps.Clone(running)
	for name := range names {
		if later[name] || flagDecides(obs, name, runningNorm, filesNow) {
			continue
		}
		value, ok := lowerFields[name]
		if patch, set := newOwn[name]; set {
			value, ok = mergeValue(value, ok, patch)
		}
		if ok {
			predicted[name] = value
		} else {
			delete(predicted, name)
		}
	}
	return json.Marshal(predicted)
}

// flagDecides reports whether a command-line flag sets the top-level field
// name: the files say otherwise than what runs, and /flagz shows the
// running value for the field's flag.
func flagDecides(obs Observed, name string, running, files map[string]any) bool {
	p := path{segments: []string{name}, keys: []bool{false}}
	flag := flagFor(p)
	if flag == "" || obs.Flags == nil {
		return false
	}
	value, ok := obs.Flags[flag]
	if !ok || sameValue(running[name], files[name]) {
		return false
	}
	return flagShows(value, p, running[name])
}

// mergedFiles merges the files' contents as the kubelet merges its
// drop-ins over its --config file: each a JSON merge patch (RFC 7386) over
// the result so far, starting from a configuration with nothing set. Files
// that are absent or empty add nothing.
func mergedFiles(files []File) ([]byte, error) {
	merged := []byte(`{"apiVersion":"` + kubeletconfigv1beta1.SchemeGroupVersion.String() + `","kind":"KubeletConfiguration"}`)
	for _, f := range files {
		if len(bytes.TrimSpace(f.Data)) == 0 {
			continue
		}
		asJSON, err := yaml.YAMLToJSON(f.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		if merged, err = jsonpatch.MergePatch(merged, asJSON); err != nil {
			return nil, fmt.Errorf("merging %s: %w", f.Path, err)
		}
	}
	return merged, nil
}

// mergeValue merges patch over base as a JSON merge patch merges one
// field: maps key by key (null removing a key), anything else replaced;
// ok is false when the field ends up unset.
func mergeValue(base any, baseSet bool, patch any) (any, bool) {
	if patch == nil {
		return nil, false
	}
	patchMap, isMap := patch.(map[string]any)
	baseMap, baseIsMap := base.(map[string]any)
	if !isMap {
		return patch, true
	}
	if !baseSet || !baseIsMap {
		baseMap = map[string]any{}
	}
	out := maps.Clone(baseMap)
	for k, v := range patchMap {
		if merged, ok := mergeValue(out[k], out[k] != nil, v); ok {
			out[k] = merged
		} else {
			delete(out, k)
		}
	}
	return out, true
}
