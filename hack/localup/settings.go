package main

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/settings"
)

// rewriteSettings sets the minimum kubelet version of a NodeguardPolicy
// (the settings file), and checks the result as the webhook will.
func rewriteSettings(shipped []byte, minKubeletVersion string) (string, error) {
	var f settings.File
	if err := yaml.UnmarshalStrict(shipped, &f); err != nil {
		return "", fmt.Errorf("the shipped policy: %w", err)
	}
	f.MinKubeletVersion = minKubeletVersion
	data, err := yaml.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encoding the policy: %w", err)
	}
	if _, err := settings.Parse(data, "the demonstration's policy"); err != nil {
		return "", err
	}
	return string(data), nil
}
