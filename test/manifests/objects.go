package manifests

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The webhook's workload, as manifests/base names it.
const (
	webhookName      = "nodeguard-webhook"
	webhookContainer = "webhook"
)

// objects is one rendering of a kustomization.
type objects []*unstructured.Unstructured

func (o objects) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range o {
		if obj.GetKind() == kind {
			out = append(out, obj)
		}
	}
	return out
}

func (o objects) get(kind, name string) (*unstructured.Unstructured, error) {
	var found *unstructured.Unstructured
	for _, obj := range o.ofKind(kind) {
		if obj.GetName() != name {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("two %s objects named %s", kind, name)
		}
		found = obj
	}
	if found == nil {
		return nil, fmt.Errorf("no %s named %s", kind, name)
	}
	return found, nil
}

// typed converts the object kind/name to T.
func typed[T any](o objects, kind, name string) (*T, error) {
	obj, err := o.get(kind, name)
	if err != nil {
		return nil, err
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &out, true); err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return &out, nil
}

// webhookDeployment is the webhook's Deployment and its container.
func webhookDeployment(o objects) (*appsv1.Deployment, *corev1.Container, error) {
	deploy, err := typed[appsv1.Deployment](o, "Deployment", webhookName)
	if err != nil {
		return nil, nil, err
	}
	c := container(&deploy.Spec.Template.Spec, webhookContainer)
	if c == nil {
		return nil, nil, fmt.Errorf("Deployment %s has no container %s", webhookName, webhookContainer)
	}
	return deploy, c, nil
}

// container is the named container of spec, or nil.
func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}
