package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// Dir returns the absolute path of manifests/<sub> in this repository.
func Dir(sub string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "manifests", sub), nil
}

// Render builds a kustomization directory into objects, in the order the
// kustomization's sortOptions give (the shipped ones put the Namespace first
// and webhook registrations last), as `kubectl kustomize` does.
func Render(kustomizationDir string) ([]*unstructured.Unstructured, error) {
	options := krusty.MakeDefaultOptions()
	// Unspecified, as kubectl leaves it: the kustomization's sortOptions
	// decide, and krusty does not warn that a flag was overridden.
	options.Reorder = krusty.ReorderOptionUnspecified
	resources, err := krusty.MakeKustomizer(options).Run(filesys.MakeFsOnDisk(), kustomizationDir)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", kustomizationDir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON, so that numbers are int64 as unstructured wants.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %s: %w", kustomizationDir, r.CurId(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("rendering %s: %s: %w", kustomizationDir, r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// Apply server-side applies objects in order, as field manager "nodeguard".
// Unknown or duplicate fields are errors, so a typo in a manifest fails here
// rather than being dropped silently.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("mapping %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = client.Resource(mapping.Resource)
		if obj.GetNamespace() != "" {
			ri = client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		force := true
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "nodeguard", Force: &force, FieldValidation: metav1.FieldValidationStrict}); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// WriteKustomization writes a kustomization in dir whose resources are the
// kustomization in base and whose components are components, as an
// operator's own overlay adds a component, with the shipped order
// (Namespaces first, webhook registrations last). Kustomize takes only
// relative paths there; the arguments may be absolute.
func WriteKustomization(dir, base string, components ...string) error {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("kustomization %s: %w", dir, err)
	}
	rel := func(path string) (string, error) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", fmt.Errorf("kustomization %s: %w", path, err)
		}
		return filepath.Rel(absDir, abs)
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	r, err := rel(base)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "resources:\n  - %q\ncomponents:\n", r)
	for _, c := range components {
		if r, err = rel(c); err != nil {
			return err
		}
		fmt.Fprintf(&b, "  - %q\n", r)
	}
	b.WriteString("sortOptions:\n  order: legacy\n")
	if err := os.MkdirAll(absDir, 0o755); err != nil {
		return fmt.Errorf("kustomization %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(absDir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("kustomization %s: %w", dir, err)
	}
	return nil
}
