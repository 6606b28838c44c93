package cli

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// rolloutAPI is what the rollout commands do with KubeletConfigRollouts.
// Tests substitute a fake.
type rolloutAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.KubeletConfigRollout, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.KubeletConfigRolloutList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*v1alpha1.KubeletConfigRollout, error)
}

// rolloutClient is a typed REST client of the CRD, built as the rollout
// controller builds its own (pkg/rollout/controller), so that the plugin
// and the controller read rollouts into the same types the same way,
// without a generated clientset and without importing the controller.
type rolloutClient struct {
	rest rest.Interface
}

func newRolloutClient(cfg *rest.Config) (*rolloutClient, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building the KubeletConfigRollout client: %w", err)
	}
	return &rolloutClient{rest: client}, nil
}

func (c *rolloutClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.KubeletConfigRollout, error) {
	out := &v1alpha1.KubeletConfigRollout{}
	err := c.rest.Get().Resource(rolloutsResource.Resource).Name(name).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *rolloutClient) List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.KubeletConfigRolloutList, error) {
	out := &v1alpha1.KubeletConfigRolloutList{}
	err := c.rest.Get().Resource(rolloutsResource.Resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *rolloutClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*v1alpha1.KubeletConfigRollout, error) {
	out := &v1alpha1.KubeletConfigRollout{}
	err := c.rest.Patch(pt).Resource(rolloutsResource.Resource).Name(name).VersionedParams(&opts, metav1.ParameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}
