package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/reconciler"
)

// Source holds the agent's watches.
type Source struct {
	client   kubeclient.Interface
	nodeName string
	onChange func()

	node cache.SharedIndexInformer
	// readPods says whether observations offer the pods bound to the Node.
	readPods bool
	drainer  reconciler.Drainer

	// mu guards cm, which Observe replaces and Stop ends.
	mu      sync.Mutex
	cm      *configMapWatch
	stopped bool
	// wg counts running informers, so Stop can wait for them all.
	wg sync.WaitGroup
}

// Options say what else to read than the Node and its ConfigMap.
type Options struct {
	// ReadPods offers, in each online observation, a list of the pods
	// bound to the Node, for the trial's signals.
	ReadPods bool
	// Drainer, when set, is offered in each online observation.
	Drainer reconciler.Drainer
}

// New prepares the watches; Run starts them. onChange is called on every
// event and must not block.
func New(client kubeclient.Interface, nodeName string, opts Options, onChange func()) (*Source, error) {
	if nodeName == "" {
		return nil, errors.New("source: no node name")
	}
	s := &Source{client: client, nodeName: nodeName, onChange: onChange}
	s.node = namedInformer(nodeLister(client), nodeName, &corev1.Node{})
	if _, err := s.node.AddEventHandler(s.handler()); err != nil {
		return nil, fmt.Errorf("watching Node %s: %w", nodeName, err)
	}
	s.readPods, s.drainer = opts.ReadPods, opts.Drainer
	return s, nil
}

// namedLister lists or watches with the given (name-selecting) options.
type namedLister struct {
	// client is the clientset behind the functions, for client-go to learn
	// whether it can stream lists (fake clientsets cannot).
	client any
	list   func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	watch  func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func nodeLister(client kubeclient.Interface) namedLister {
	return namedLister{
		client: client,
		list: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.Nodes().List(ctx, opts)
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Nodes().Watch(ctx, opts)
		},
	}
}

func configMapLister(client kubeclient.Interface, namespace string) namedLister {
	return namedLister{
		client: client,
		list: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.ConfigMaps(namespace).List(ctx, opts)
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.ConfigMaps(namespace).Watch(ctx, opts)
		},
	}
}

// namedInformer lists and watches one object by name: the only list and
// watch a node is authorized for.
func namedInformer(lister namedLister, name string, example runtime.Object) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return lister.list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return lister.watch(ctx, opts)
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, lister.client), example, cache.SharedIndexInformerOptions{})
	// Managed fields are never read; a Node carries many of them.
	_ = informer.SetTransform(func(obj any) (any, error) {
		if accessor, ok := obj.(metav1.Object); ok {
			accessor.SetManagedFields(nil)
		}
		return obj, nil
	})
	return informer
}

func (s *Source) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.onChange() },
		UpdateFunc: func(any, any) { s.onChange() },
		DeleteFunc: func(any) { s.onChange() },
	}
}

// Run runs the Node watch until ctx ends, then stops the ConfigMap watch
// and waits for both.
func (s *Source) Run(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.node.RunWithContext(ctx)
	}()
	<-ctx.Done()
	s.mu.Lock()
	s.stopped = true
	if s.cm != nil {
		s.cm.cancel()
		s.cm = nil
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Node returns the agent's Node as last seen, or nil.
func (s *Source) Node() *corev1.Node {
	obj, exists, err := s.node.GetStore().GetByKey(s.nodeName)
	if err != nil || !exists {
		return nil
	}
	node, _ := obj.(*corev1.Node)
	return node
}

// Observe reads the latest state for the reconciler, and points the
// ConfigMap watch at the current assignment. Only the agent's worker calls
// it.
func (s *Source) Observe(ctx context.Context) reconciler.Observation {
	node := s.Node()
	if node == nil || !s.node.HasSynced() {
		s.follow(ctx, nil)
		return reconciler.Observation{}
	}
	obs := reconciler.Observation{Online: true, KubeletVersion: KubeletVersion(node), Node: node, Drainer: s.drainer}
	if s.readPods {
		obs.Pods = s.listPods
	}
	assignment, ok, err := contract.AssignmentOf(node)
	switch {
	case err != nil:
		obs.AssignmentErr = err
		// Keep watching what was watched: the agent keeps its config.
		return obs
	case !ok:
		s.follow(ctx, nil)
		return obs
	}
	obs.Assignment = &assignment
	w := s.follow(ctx, &assignment.ConfigMap)
	obs.ConfigMap, obs.ConfigMapErr = w.current()
	return obs
}

// KubeletVersion parses the Node's reported kubelet version; nil when it is
// missing or unparseable.
func KubeletVersion(node *corev1.Node) *version.Version {
	v, err := version.ParseGeneric(node.Status.NodeInfo.KubeletVersion)
	if err != nil {
		return nil
	}
	return v
}

// follow makes the ConfigMap watch match ref (nil: no watch) and returns it.
func (s *Source) follow(ctx context.Context, ref *contract.ConfigMapRef) *configMapWatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cm != nil && ref != nil && s.cm.ref == *ref {
		return s.cm
	}
	if s.cm != nil {
		klog.FromContext(ctx).V(2).Info("Stopping the ConfigMap watch", "configMap", s.cm.ref.String())
		s.cm.cancel()
		s.cm = nil
	}
	if ref == nil || s.stopped {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Watching the assigned ConfigMap", "configMap", ref.String())
	s.cm = s.startConfigMapWatch(ctx, *ref)
	return s.cm
}

// configMapWatch is the named watch on the assigned ConfigMap.
type configMapWatch struct {
	ref      contract.ConfigMapRef
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc

	mu      sync.Mutex
	lastErr error
}

func (s *Source) startConfigMapWatch(ctx context.Context, ref contract.ConfigMapRef) *configMapWatch {
	w := &configMapWatch{ref: ref}
	w.informer = namedInformer(configMapLister(s.client, ref.Namespace), ref.Name, &corev1.ConfigMap{})
	_, _ = w.informer.AddEventHandler(s.handler())
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
		s.onChange()
	})
	watchCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w.informer.RunWithContext(watchCtx)
	}()
	return w
}

// current returns the ConfigMap, or why there is none; (nil, nil) while the
// first list is pending.
func (w *configMapWatch) current() (*corev1.ConfigMap, error) {
	if w == nil {
		return nil, nil
	}
	obj, exists, err := w.informer.GetStore().GetByKey(w.ref.String())
	if err == nil && exists {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			return cm, nil
		}
	}
	if w.informer.HasSynced() {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), w.ref.Name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return nil, w.lastErr
}
