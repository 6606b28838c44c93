package framework

import (
	"context"
	"fmt"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/manifests"
)

// applyManifests renders manifests/ (the base, or the standalone overlay
// without NodeRestriction, with opts.Components), points the webhooks at
// the webhook process and applies it all.
func applyManifests(ctx context.Context, admin *rest.Config, opts Options, webhookURL string, caBundle []byte) ([]*unstructured.Unstructured, error) {
	// Without NodeRestriction, nodeguard's documented configuration is the
	// standalone overlay: every node write reaches the webhook, which then
	// also applies NodeRestriction's pod rules.
	rendering := "base"
	if opts.WithoutNodeRestriction {
		rendering = "overlays/standalone"
	}
	dir, err := manifests.Dir(rendering)
	if err != nil {
		return nil, err
	}
	if len(opts.Components) > 0 {
		withComponents := filepath.Join(opts.WorkDir, "kustomization")
		if err := manifests.WriteKustomization(withComponents, dir, opts.Components...); err != nil {
			return nil, err
		}
		dir = withComponents
	}
	objs, err := manifests.Render(dir)
	if err != nil {
		return nil, err
	}
	if err := pointWebhooksAt(objs, webhookURL, caBundle); err != nil {
		return nil, err
	}
	if err := manifests.Apply(ctx, admin, objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// installAndPoint runs install, then points the ValidatingWebhookConfiguration
// it installed at the webhook process: the one field the tests change, for
// want of a Service network. The live object is updated in place (read,
// clientConfigs replaced, written back), so that what installed it still
// owns it and, on uninstall, deletes it.
func installAndPoint(ctx context.Context, admin *rest.Config, install func(context.Context, *rest.Config) ([]*unstructured.Unstructured, error), webhookURL string, caBundle []byte) ([]*unstructured.Unstructured, error) {
	objs, err := install(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("installing nodeguard: %w", err)
	}
	client, err := dynamic.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	registrations := client.Resource(admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"))
	for _, obj := range objs {
		if obj.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		live, err := registrations.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the installed %s: %w", obj.GetName(), err)
		}
		if err := pointWebhooksAt([]*unstructured.Unstructured{live}, webhookURL, caBundle); err != nil {
			return nil, err
		}
		if _, err := registrations.Update(ctx, live, metav1.UpdateOptions{FieldManager: "nodeguard-e2e"}); err != nil {
			return nil, fmt.Errorf("pointing the installed webhooks at %s: %w", webhookURL, err)
		}
	}
	return objs, nil
}
