package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// rolloutsResource is the REST resource name of KubeletConfigRollouts.
const rolloutsResource = "kubeletconfigrollouts"

// RolloutInterface is what the controller does with KubeletConfigRollouts
// through the apiserver.
type RolloutInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.KubeletConfigRolloutList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.KubeletConfigRollout, error)
	UpdateStatus(ctx context.Context, r *v1alpha1.KubeletConfigRollout, opts metav1.UpdateOptions) (*v1alpha1.KubeletConfigRollout, error)
}

// RolloutClient is a typed REST client for KubeletConfigRollouts: the four
// calls the controller makes, on nodeguard's own types.
type RolloutClient struct {
	rest rest.Interface
}

var _ RolloutInterface = (*RolloutClient)(nil)

// NewScheme returns a scheme that knows nodeguard's API types and nothing
// else (the metav1 types AddToScheme adds included).
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return scheme, nil
}

// NewRolloutClient returns a client for cfg's apiserver; cfg is copied.
func NewRolloutClient(cfg *rest.Config) (*RolloutClient, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("rollout client: %w", err)
	}
	return &RolloutClient{rest: client}, nil
}

func (c *RolloutClient) List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.KubeletConfigRolloutList, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	out := &v1alpha1.KubeletConfigRolloutList{}
	err := c.rest.Get().Resource(rolloutsResource).VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout).Do(ctx).Into(out)
	return out, err
}

func (c *RolloutClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return c.rest.Get().Resource(rolloutsResource).VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout).Watch(ctx)
}

func (c *RolloutClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.KubeletConfigRollout, error) {
	out := &v1alpha1.KubeletConfigRollout{}
	err := c.rest.Get().Resource(rolloutsResource).Name(name).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *RolloutClient) UpdateStatus(ctx context.Context, r *v1alpha1.KubeletConfigRollout, opts metav1.UpdateOptions) (*v1alpha1.KubeletConfigRollout, error) {
	out := &v1alpha1.KubeletConfigRollout{}
	err := c.rest.Put().Resource(rolloutsResource).Name(r.Name).SubResource("status").
		VersionedParams(&opts, metav1.ParameterCodec).Body(r).Do(ctx).Into(out)
	return out, err
}

// newRolloutInformer is a shared informer over every KubeletConfigRollout,
// indexed by the ConfigMap each names.
func newRolloutInformer(client RolloutInterface, resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}
	// A client that cannot stream the initial list over a watch (a test's
	// fake) says so, and the reflector lists instead.
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1alpha1.KubeletConfigRollout{}, resync, cache.Indexers{
		configMapIndex: func(obj any) ([]string, error) {
			r, ok := obj.(*v1alpha1.KubeletConfigRollout)
			if !ok {
				return nil, nil
			}
			return []string{r.Spec.ConfigMapRef.Namespace + "/" + r.Spec.ConfigMapRef.Name}, nil
		},
	})
}

// configMapIndex indexes rollouts by "namespace/name" of their ConfigMap.
const configMapIndex = "configMapRef"
