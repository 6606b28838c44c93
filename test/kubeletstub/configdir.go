package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"
)

// dropInExtension is the only extension the kubelet reads in --config-dir.
const dropInExtension = ".conf"

// readConfig returns the configuration the kubelet would start with: the
// --config file, and with --config-dir the drop-ins merged over it as the
// kubelet merges them (cmd/kubelet/app/server.go,
// mergeKubeletConfigurations): files ending in .conf, subdirectories
// included, in lexical order, each a JSON merge patch over the result so
// far, each required to be a kubelet.config.k8s.io/v1beta1
// KubeletConfiguration. Unlike the kubelet, the stub merges over the file as
// written rather than over its defaulted form; what it looks at
// (staticPodURL) has no default. Any error is a kubelet that cannot start.
// With a config dir, the restart log's SHA-256 is that of the merged
// configuration (JSON), what the stub runs.
func (s *stub) readConfig() ([]byte, error) {
	base, err := os.ReadFile(s.configPath)
	if err != nil || s.configDir == "" {
		return base, err
	}
	merged, err := yaml.YAMLToJSON(base)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", s.configPath, err)
	}
	err = filepath.WalkDir(s.configDir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() || filepath.Ext(entry.Name()) != dropInExtension {
			return err
		}
		dropIn, err := readDropIn(path)
		if err != nil {
			return err
		}
		if merged, err = jsonpatch.MergePatch(merged, dropIn); err != nil {
			return fmt.Errorf("merging drop-in %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("config dir %s: %w", s.configDir, err)
	}
	return merged, nil
}

// readDropIn reads one drop-in as JSON, refusing what the kubelet refuses.
func readDropIn(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("drop-in %s: %w", path, err)
	}
	var typeMeta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(asJSON, &typeMeta); err != nil {
		return nil, fmt.Errorf("drop-in %s: %w", path, err)
	}
	if typeMeta.APIVersion != "kubelet.config.k8s.io/v1beta1" || typeMeta.Kind != "KubeletConfiguration" {
		return nil, fmt.Errorf("drop-in %s: apiVersion %q, kind %q: want kubelet.config.k8s.io/v1beta1 KubeletConfiguration", path, typeMeta.APIVersion, typeMeta.Kind)
	}
	return asJSON, nil
}
