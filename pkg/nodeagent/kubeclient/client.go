package kubeclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// NodeClient is what the agent does with Nodes: a named list and watch of
// its own, and patches of its metadata and status. client-go's typed
// NodeInterface satisfies it.
type NodeClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// ConfigMapClient is what the agent does with ConfigMaps: a named list and
// watch of the assigned one. client-go's typed ConfigMapInterface satisfies
// it.
type ConfigMapClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// PodClient is what the agent does with Pods: a list of the pods bound to
// its Node (fieldSelector spec.nodeName=NODE), the one the node authorizer
// allows a node, to judge trials by their workloads and to drain; and
// evictions of those pods, which NodeRestriction allows a node for pods
// bound to itself only. client-go's typed PodInterface satisfies it.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	EvictV1(ctx context.Context, eviction *policyv1.Eviction) error
}

// EventClient writes the Events the agent records about its Node.
// client-go's typed EventInterface satisfies it.
type EventClient interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Update(ctx context.Context, event *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// Interface is the agent's whole use of the API: core/v1 Nodes, ConfigMaps,
// Pods (read only) and Events. Tests back it with a fake clientset
// (kubeclienttest).
type Interface interface {
	Nodes() NodeClient
	ConfigMaps(namespace string) ConfigMapClient
	Pods(namespace string) PodClient
	Events(namespace string) EventClient
}

// NewScheme returns a scheme that knows core/v1 only. The agent builds one
// and gives it to New and to its event recorder. client-go's kubernetes
// clientset registers every API group of Kubernetes at start-up, and its
// typed clients import it: most of the agent's memory at rest went to code
// and type data for APIs it never calls.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	// core/v1 registers the v1 meta types (ListOptions, Status, ...) with
	// their conversions to query parameters too.
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering core/v1: %w", err)
	}
	return scheme, nil
}

// Client is Interface over a REST client for core/v1.
type Client struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

var _ Interface = (*Client)(nil)

// NewForConfig makes a Client from cfg, which is copied, with scheme (from
// NewScheme) for its requests. Use New for the kubelet's certificate files,
// which also follows their rotation.
func NewForConfig(cfg *rest.Config, scheme *runtime.Scheme) (*Client, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the API transport: %w", err)
	}
	return newForConfigAndClient(cfg, httpClient, scheme)
}

func newForConfigAndClient(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme) (*Client, error) {
	if scheme == nil {
		return nil, errors.New("building the API client: no scheme given")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	restClient, err := rest.RESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the API client: %w", err)
	}
	return &Client{rest: restClient, params: runtime.NewParameterCodec(scheme)}, nil
}

// Nodes implements Interface.
func (c *Client) Nodes() NodeClient { return nodes{resource{c.rest, c.params, "", "nodes"}} }

// ConfigMaps implements Interface.
func (c *Client) ConfigMaps(namespace string) ConfigMapClient {
	return configMaps{resource{c.rest, c.params, namespace, "configmaps"}}
}

// Pods implements Interface.
func (c *Client) Pods(namespace string) PodClient {
	return pods{resource{c.rest, c.params, namespace, "pods"}}
}

// Events implements Interface.
func (c *Client) Events(namespace string) EventClient {
	return events{resource{c.rest, c.params, namespace, "events"}}
}

// resource is one resource, namespaced or not, with the verbs the agent
// uses; the typed wrappers below only fix the object types.
type resource struct {
	rest      rest.Interface
	params    runtime.ParameterCodec
	namespace string
	name      string
}

// timeout is the client-side timeout a list or watch asks for, as typed
// clients set it.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

func (r resource) list(ctx context.Context, opts metav1.ListOptions, into runtime.Object) error {
	return r.rest.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, r.params).Timeout(timeout(opts)).Do(ctx).Into(into)
}

func (r resource) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.rest.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, r.params).Timeout(timeout(opts)).Watch(ctx)
}

func (r resource) patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, into runtime.Object, subresources ...string) error {
	return r.rest.Patch(pt).NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(name).
		SubResource(subresources...).VersionedParams(&opts, r.params).Body(data).Do(ctx).Into(into)
}

type nodes struct{ resource }

func (n nodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	list := &corev1.NodeList{}
	return list, n.list(ctx, opts, list)
}

func (n nodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return n.watch(ctx, opts)
}

func (n nodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	node := &corev1.Node{}
	return node, n.patch(ctx, name, pt, data, opts, node, subresources...)
}

type configMaps struct{ resource }

func (c configMaps) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	list := &corev1.ConfigMapList{}
	return list, c.list(ctx, opts, list)
}

func (c configMaps) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, opts)
}

type pods struct{ resource }

func (p pods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	list := &corev1.PodList{}
	return list, p.list(ctx, opts, list)
}

// EvictV1 posts a policy/v1 Eviction to the pod's eviction subresource. The
// body is encoded here rather than by the client's scheme, which knows
// core/v1 only (NewScheme).
func (p pods) EvictV1(ctx context.Context, eviction *policyv1.Eviction) error {
	body := eviction.DeepCopy()
	body.APIVersion, body.Kind = policyv1.SchemeGroupVersion.String(), "Eviction"
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the eviction of pod %s/%s: %w", eviction.Namespace, eviction.Name, err)
	}
	return p.rest.Post().Namespace(eviction.Namespace).Resource(p.name).Name(eviction.Name).
		SubResource("eviction").SetHeader("Content-Type", "application/json").Body(data).Do(ctx).Error()
}

type events struct{ resource }

func (e events) Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error) {
	created := &corev1.Event{}
	err := e.rest.Post().NamespaceIfScoped(e.namespace, e.namespace != "").Resource(e.name).
		VersionedParams(&opts, e.params).Body(event).Do(ctx).Into(created)
	return created, err
}

func (e events) Update(ctx context.Context, event *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error) {
	updated := &corev1.Event{}
	err := e.rest.Put().NamespaceIfScoped(e.namespace, e.namespace != "").Resource(e.name).Name(event.Name).
		VersionedParams(&opts, e.params).Body(event).Do(ctx).Into(updated)
	return updated, err
}

func (e events) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error) {
	patched := &corev1.Event{}
	return patched, e.patch(ctx, name, pt, data, opts, patched, subresources...)
}
