package graph

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Informers are the three informers the graph is fed from.
type Informers struct {
	Nodes cache.SharedIndexInformer
	// Pods holds only bound pods.
	Pods cache.SharedIndexInformer
	// ConfigMaps holds only the metadata of eligible ConfigMaps.
	ConfigMaps cache.SharedIndexInformer
}

// NewInformers builds the informers with the narrowest watches that still
// see every change the graph needs: bound pods only, eligible ConfigMaps'
// metadata only, and transforms that drop what the graph never reads. When
// freshness is not nil it sees every list and watch they make, to tell when
// the graph stops following the apiserver; nil leaves them unmonitored.
func NewInformers(client kubernetes.Interface, meta metadata.Interface, resync time.Duration, freshness *Freshness) (Informers, error) {
	boundPods := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}
	eligibleOnly := func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{contract.EligibleLabel: contract.EligibleLabelValue}).String()
	}
	configMapResource := meta.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(metav1.NamespaceAll)
	newInformer := func(name string, lw *cache.ListWatch, watchListClient any, object runtime.Object) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(freshness.monitor(name, cache.ToListWatcherWithWatchListSemantics(lw, watchListClient)), object, resync, cache.Indexers{})
	}

	nodeClient, podClient := client.CoreV1().Nodes(), client.CoreV1().Pods(metav1.NamespaceAll)
	nodes := newInformer("nodes", narrowedListWatch(nodeClient.List, nodeClient.Watch, nil), client, &corev1.Node{})
	pods := newInformer("pods", narrowedListWatch(podClient.List, podClient.Watch, boundPods), client, &corev1.Pod{})
	configMaps := newInformer("configmaps", narrowedListWatch(configMapResource.List, configMapResource.Watch, eligibleOnly), meta, &metav1.PartialObjectMetadata{})
	if err := nodes.SetTransform(TrimNode); err != nil {
		return Informers{}, fmt.Errorf("node informer transform: %w", err)
	}
	if err := pods.SetTransform(TrimPod); err != nil {
		return Informers{}, fmt.Errorf("pod informer transform: %w", err)
	}
	return Informers{Nodes: nodes, Pods: pods, ConfigMaps: configMaps}, nil
}

// narrowedListWatch lists and watches one resource, with narrow (when not
// nil) applied to every request's options: relists and rewatches must stay
// as narrow as the first list.
func narrowedListWatch[L runtime.Object](
	list func(context.Context, metav1.ListOptions) (L, error),
	watchResource func(context.Context, metav1.ListOptions) (watch.Interface, error),
	narrow func(*metav1.ListOptions),
) *cache.ListWatch {
	if narrow == nil {
		narrow = func(*metav1.ListOptions) {}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return watchResource(ctx, o)
		},
	}
}

// Populator feeds a Graph from informers and publishes it once every handler
// has seen its informer's initial list.
type Populator struct {
	graph     *Graph
	informers Informers
	synced    []cache.InformerSynced
}

// NewPopulator registers the graph's event handlers on the informers.
func NewPopulator(g *Graph, inf Informers) (*Populator, error) {
	p := &Populator{graph: g, informers: inf}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandlerFuncs
	}{
		{inf.Nodes, cache.ResourceEventHandlerFuncs{
			AddFunc:    p.upsertNode,
			UpdateFunc: func(_, obj any) { p.upsertNode(obj) },
			DeleteFunc: p.deleteNode,
		}},
		{inf.Pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    p.upsertPod,
			UpdateFunc: p.updatePod,
			DeleteFunc: p.deletePod,
		}},
		{inf.ConfigMaps, cache.ResourceEventHandlerFuncs{
			AddFunc:    p.upsertConfigMap,
			UpdateFunc: func(_, obj any) { p.upsertConfigMap(obj) },
			DeleteFunc: p.deleteConfigMap,
		}},
	}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("adding graph event handler: %w", err)
		}
		p.synced = append(p.synced, reg.HasSynced)
	}
	return p, nil
}

// HasSynced reports whether every handler has processed its initial list.
func (p *Populator) HasSynced() bool {
	for _, s := range p.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run starts the informers, publishes the graph once the handlers have
// synced, and blocks until ctx ends.
func (p *Populator) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for _, inf := range []cache.SharedIndexInformer{p.informers.Nodes, p.informers.Pods, p.informers.ConfigMaps} {
		go inf.RunWithContext(ctx)
	}
	start := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), p.HasSynced) {
		return
	}
	p.graph.MarkSynced()
	logger.Info("Graph synced", "duration", time.Since(start))
	<-ctx.Done()
}

// unwrap returns the object inside a tombstone, and the tombstone's key for
// when the object itself is unusable, counting the tombstone for informer.
func (p *Populator) unwrap(informer string, obj any) (any, string) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		p.graph.metrics.countTombstone(informer)
		return tombstone.Obj, tombstone.Key
	}
	return obj, ""
}

func (p *Populator) upsertNode(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		p.graph.UpsertNode(node)
		return
	}
	klog.Background().Info("Ignoring unexpected object in node informer", "type", fmt.Sprintf("%T", obj))
}

func (p *Populator) deleteNode(obj any) {
	obj, key := p.unwrap("nodes", obj)
	name := key
	if node, ok := obj.(*corev1.Node); ok {
		name = node.Name
	}
	if name == "" {
		klog.Background().Info("Ignoring unexpected deleted object in node informer", "type", fmt.Sprintf("%T", obj))
		return
	}
	p.graph.DeleteNode(name)
}

func (p *Populator) upsertPod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		p.graph.UpsertPod(pod)
		return
	}
	klog.Background().Info("Ignoring unexpected object in pod informer", "type", fmt.Sprintf("%T", obj))
}

// updatePod skips the frequent status-only updates: a bound pod's node and
// references are immutable, except that ephemeral containers can be added.
func (p *Populator) updatePod(oldObj, obj any) {
	oldPod, okOld := oldObj.(*corev1.Pod)
	pod, ok := obj.(*corev1.Pod)
	if okOld && ok && oldPod.UID == pod.UID && oldPod.Spec.NodeName == pod.Spec.NodeName &&
		len(oldPod.Spec.EphemeralContainers) == len(pod.Spec.EphemeralContainers) {
		return
	}
	p.upsertPod(obj)
}

func (p *Populator) deletePod(obj any) {
	obj, key := p.unwrap("pods", obj)
	if pod, ok := obj.(*corev1.Pod); ok {
		p.graph.DeletePod(pod.Namespace, pod.Name)
		return
	}
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil && name != "" {
		p.graph.DeletePod(namespace, name)
		return
	}
	klog.Background().Info("Ignoring unexpected deleted object in pod informer", "type", fmt.Sprintf("%T", obj))
}

func (p *Populator) upsertConfigMap(obj any) {
	if cm, ok := obj.(metav1.Object); ok {
		p.graph.UpsertConfigMap(cm)
		return
	}
	klog.Background().Info("Ignoring unexpected object in configmap informer", "type", fmt.Sprintf("%T", obj))
}

func (p *Populator) deleteConfigMap(obj any) {
	obj, key := p.unwrap("configmaps", obj)
	if cm, ok := obj.(metav1.Object); ok {
		p.graph.DeleteConfigMap(cm.GetNamespace(), cm.GetName())
		return
	}
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil && name != "" {
		p.graph.DeleteConfigMap(namespace, name)
		return
	}
	klog.Background().Info("Ignoring unexpected deleted object in configmap informer", "type", fmt.Sprintf("%T", obj))
}
