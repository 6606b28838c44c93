package manifests

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	objs, err := Render(dir)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" || obj.GetName() != "nodeguard-webhook" {
			continue
		}
		var deploy appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &deploy); err != nil {
			return nil, fmt.Errorf("reading the rendered Deployment nodeguard-webhook: %w", err)
		}
		var settings []string
		for _, c := range deploy.Spec.Template.Spec.Containers {
			if c.Name != "webhook" {
				continue
			}
			for _, e := range c.Env {
				if e.Name == "GOGC" || e.Name == "GOMEMLIMIT" {
					settings = append(settings, e.Name+"="+e.Value)
				}
			}
		}
		return settings, nil
	}
	return nil, fmt.Errorf("manifests/base renders no Deployment nodeguard-webhook")
}
