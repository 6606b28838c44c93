package manifests

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// WebhookGCSettings returns the garbage collector settings (GOGC,
// GOMEMLIMIT) that manifests/base gives the webhook's container, as
// NAME=value, rendered as `kubectl kustomize` renders it: benchmarks run
// nodeguard's servers as the shipped Deployment runs them.
func WebhookGCSettings() ([]string, error) {
	dir, err := Dir("base")
	if err != nil {
		return nil, err
	}
	rendered, err := Render(dir)
	if err != nil {
		return nil, err
	}
	_, c, err := webhookDeployment(rendered)
	if err != nil {
		return nil, err
	}
	var settings []string
	for name, value := range gcEnv(c) {
		settings = append(settings, name+"="+value)
	}
	slices.Sort(settings)
	return settings, nil
}

// gcEnv is the collector's variables among c's environment.
func gcEnv(c *corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.Name == "GOGC" || e.Name == "GOMEMLIMIT" {
			env[e.Name] = e.Value
		}
	}
	return env
}
