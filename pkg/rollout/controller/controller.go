package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/generated/informers/externalversions"
	nodeguardlisters "github.com/nodeguard/nodeguard/pkg/generated/listers/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// FieldManager is the field manager of every write the controller makes,
// so that a Node's managedFields say which annotations it set.
const FieldManager = "nodeguard-rollout-controller"

// DefaultExpectationsTimeout bounds the wait for the caches to show the
// controller's own writes; client-go's controllers use five minutes, a
// rollout that waits that long on a lost event would look stuck.
const DefaultExpectationsTimeout = time.Minute

// Config is what New needs.
type Config struct {
	// Kube reads and patches Nodes.
	Kube kubernetes.Interface
	// Metadata lists and watches the metadata of eligible ConfigMaps.
	Metadata metadata.Interface
	// Rollouts reads KubeletConfigRollouts and writes their status.
	Rollouts versioned.Interface
	// Recorder records Events; nil records none.
	Recorder events.EventRecorder
	// Metrics, nil for none.
	Metrics *Metrics
	// Resync is the informers' resync period; zero means none.
	Resync time.Duration
	// ExpectationsTimeout; zero means DefaultExpectationsTimeout.
	ExpectationsTimeout time.Duration
	// Clock; nil means the real one.
	Clock clock.WithTicker
	// MaxPatchesInFlight bounds a rollout's assignments and reverts in
	// flight at once, and apart from them its trial-passed marks; zero
	// means DefaultMaxPatchesInFlight.
	MaxPatchesInFlight int
	// StatusInterval is how often at most a rollout's status is written
	// while only its counts change (status.go); zero means
	// DefaultStatusInterval.
	StatusInterval time.Duration
	// TrialPeriod is how long a trial is counted as lasting for a rollout
	// whose spec.trial gives no period (rollout.Input.DefaultTrialPeriod);
	// zero means rollout.DefaultTrialPeriod.
	TrialPeriod time.Duration
}

// Controller is the KubeletConfigRollout controller.
type Controller struct {
	kube     kubernetes.Interface
	metadata metadata.Interface
	rollouts nodeguardclient.KubeletConfigRolloutInterface
	recorder events.EventRecorder
	metrics  *Metrics
	clock    clock.WithTicker

	nodeFactory     informers.SharedInformerFactory
	metadataFactory metadatainformer.SharedInformerFactory
	rolloutFactory  externalversions.SharedInformerFactory
	nodeInformer    cache.SharedIndexInformer
	// nodes is nodeInformer's cache.
	nodes           cache.Indexer
	rolloutInformer cache.SharedIndexInformer
	rolloutLister   nodeguardlisters.KubeletConfigRolloutLister
	cmInformer      cache.SharedIndexInformer
	// podFactory and podInformer watch the pods bound to Nodes, and
	// targets the targets' configurations, for the report of unfit Nodes
	// (fit.go).
	podFactory  informers.SharedInformerFactory
	podInformer cache.SharedIndexInformer
	targets     *targetConfigs
	// observed is each cached Node's reading, made by the Node handlers
	// (observations.go).
	observed       *observations
	trialPeriod    time.Duration
	statusInterval time.Duration
	maxPatches     int
	synced         []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	// sending are the assignments sent in the background (patches.go),
	// which Run awaits before it returns.
	sending sync.WaitGroup

	// states are what the controller keeps in memory about each rollout
	// (state.go), by name.
	statesMu            sync.Mutex
	states              map[string]*rolloutState
	expectationsTimeout time.Duration
}

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// configMapIndex indexes rollouts by "namespace/name" of their ConfigMap.
const configMapIndex = "configMapRef"

// New builds the controller and its informers; Run starts them.
func New(cfg Config) (*Controller, error) {
	if cfg.Kube == nil || cfg.Metadata == nil || cfg.Rollouts == nil {
		return nil, errors.New("rollout controller: Kube, Metadata and Rollouts clients are required")
	}
	c := &Controller{
		kube:     cfg.Kube,
		rollouts: cfg.Rollouts.NodeguardV1alpha1().KubeletConfigRollouts(),
		recorder: cfg.Recorder,
		metrics:  cfg.Metrics,
		clock:    cfg.Clock,
		metadata: cfg.Metadata,
		states:   map[string]*rolloutState{},
		observed: newObservations(),

		expectationsTimeout: cfg.ExpectationsTimeout,
		trialPeriod:         cfg.TrialPeriod,
		statusInterval:      cfg.StatusInterval,
		maxPatches:          cfg.MaxPatchesInFlight,
		targets:             &targetConfigs{client: cfg.Kube, byRef: map[contract.ConfigMapVersion]*kubeletconfigv1beta1.KubeletConfiguration{}},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.expectationsTimeout <= 0 {
		c.expectationsTimeout = DefaultExpectationsTimeout
	}
	if c.maxPatches <= 0 {
		c.maxPatches = DefaultMaxPatchesInFlight
	}
	if c.statusInterval <= 0 {
		c.statusInterval = DefaultStatusInterval
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubeletconfigrollout", Clock: c.clock, MetricsProvider: c.metrics.queueProvider()})

	c.nodeFactory = informers.NewSharedInformerFactoryWithOptions(cfg.Kube, cfg.Resync, informers.WithTransform(stripManagedFields))
	c.nodeInformer = c.nodeFactory.Core().V1().Nodes().Informer()
	c.nodes = c.nodeInformer.GetIndexer()
	c.metadataFactory = metadatainformer.NewFilteredSharedInformerFactory(cfg.Metadata, cfg.Resync, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{contract.EligibleLabel: contract.EligibleLabelValue}.String()
	})
	c.cmInformer = c.metadataFactory.ForResource(configMapsResource).Informer()
	c.rolloutFactory = externalversions.NewSharedInformerFactory(cfg.Rollouts, cfg.Resync)
	rollouts := c.rolloutFactory.Nodeguard().V1alpha1().KubeletConfigRollouts()
	c.rolloutInformer, c.rolloutLister = rollouts.Informer(), rollouts.Lister()
	err := c.rolloutInformer.AddIndexers(cache.Indexers{configMapIndex: func(obj any) ([]string, error) {
		r, ok := obj.(*v1alpha1.KubeletConfigRollout)
		if !ok {
			return nil, nil
		}
		return []string{r.Spec.ConfigMapRef.Namespace + "/" + r.Spec.ConfigMapRef.Name}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("rollout controller: rollout index: %w", err)
	}

	if c.podFactory, c.podInformer, err = newPodInformer(cfg.Kube); err != nil {
		return nil, fmt.Errorf("rollout controller: pod index: %w", err)
	}

	var errs []error
	for _, reg := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandlerFuncs
	}{
		{c.nodeInformer, cache.ResourceEventHandlerFuncs{AddFunc: c.addNode, UpdateFunc: c.updateNode, DeleteFunc: c.deleteNode}},
		{c.cmInformer, cache.ResourceEventHandlerFuncs{AddFunc: c.configMapEvent, UpdateFunc: func(_, n any) { c.configMapEvent(n) }, DeleteFunc: c.configMapEvent}},
		{c.rolloutInformer, cache.ResourceEventHandlerFuncs{AddFunc: c.addRollout, UpdateFunc: c.updateRollout, DeleteFunc: c.deleteRollout}},
		// Pods wake no rollout: they only refine a report, which the next
		// sync brings up to date for the Nodes they mark.
		{c.podInformer, cache.ResourceEventHandlerFuncs{AddFunc: c.podEvent, UpdateFunc: func(o, n any) { c.podEvent(o); c.podEvent(n) }, DeleteFunc: c.podEvent}},
	} {
		registration, err := reg.informer.AddEventHandler(reg.handler)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.synced = append(c.synced, registration.HasSynced)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("rollout controller: event handlers: %w", err)
	}
	return c, nil
}

// stripManagedFields drops what Decide never reads from every cached Node.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// HasSynced reports whether the informers have synced; the controller
// decides nothing before.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Run starts the informers and workers and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)

	c.nodeFactory.Start(ctx.Done())
	c.metadataFactory.Start(ctx.Done())
	c.rolloutFactory.Start(ctx.Done())
	c.podFactory.Start(ctx.Done())
	defer c.podFactory.Shutdown()
	defer c.nodeFactory.Shutdown()
	defer c.metadataFactory.Shutdown()
	defer c.rolloutFactory.Shutdown()

	logger.Info("Waiting for caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return fmt.Errorf("rollout controller: caches did not sync: %w", context.Cause(ctx))
	}
	logger.Info("Caches synced; starting workers", "workers", workers)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.sending.Wait()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		c.metrics.sync("error")
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing rollout failed; requeued", "rollout", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// unwrap returns the object of an event, a tombstone's included.
func unwrap(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

func (c *Controller) addNode(obj any) {
	if node, ok := unwrap(obj).(*corev1.Node); ok {
		c.observed.set(node)
		c.touchSelecting(node.Name, true, node.Labels)
	}
}

func (c *Controller) updateNode(oldObj, newObj any) {
	oldNode, ok1 := unwrap(oldObj).(*corev1.Node)
	newNode, ok2 := unwrap(newObj).(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	// The old version's reading is the one its own event recorded; the new
	// one is read once here, for this comparison and every sync after it.
	before, _ := c.observed.of(oldNode)
	after := c.observed.set(newNode).obs
	// Nearly every Node update is a kubelet's heartbeat. A sync for each
	// would keep every rollout syncing back to back on a large pool, and
	// the update that matters would wait for the one in progress: such an
	// update is only marked, for the next decision to read.
	c.touchSelecting(newNode.Name, !decidedAlike(oldNode, newNode, before, after), oldNode.Labels, newNode.Labels)
}

// decidedAlike reports whether no decision can tell the two versions of a
// Node apart, or none needs to wake for the difference, given their
// readings (rollout.ObserveNode): the same labels (so the same rollouts
// select it) and the same reading but for the resourceVersion and the
// trial-passed mark. What made a part unreadable is only logged, never
// decided on. The mark is the controller's own record, which the decisions
// after the one that sent it already read (unseen); its arrival frees no
// slot and changes no state, and waking every rollout for each Node's mark
// would have it decide once more per Node moved.
func decidedAlike(a, b *corev1.Node, obsA, obsB rollout.NodeObservation) bool {
	if !maps.Equal(a.Labels, b.Labels) {
		return false
	}
	obsA.TrialPassed, obsB.TrialPassed = "", ""
	return rollout.SameButVersion(obsA, obsB)
}

func (c *Controller) deleteNode(obj any) {
	if node, ok := unwrap(obj).(*corev1.Node); ok {
		c.observed.remove(node.Name)
		c.touchSelecting(node.Name, true, node.Labels)
	}
}

// touchSelecting marks the Node for every rollout whose selector picks any
// of the label sets, and enqueues those rollouts when enqueue is true: a
// Node that left a selection matters to the rollout it left (its counts, a
// Node no longer shared) as much as to the one it joined.
func (c *Controller) touchSelecting(node string, enqueue bool, sets ...map[string]string) {
	for _, r := range c.rolloutsCached() {
		selector, err := rollout.Selector(r)
		if err != nil {
			continue
		}
		for _, set := range sets {
			if selector.Matches(labels.Set(set)) {
				c.state(r.Name).touch(node, c.clock.Now())
				if enqueue {
					c.queue.Add(r.Name)
				}
				break
			}
		}
	}
}

func (c *Controller) configMapEvent(obj any) {
	m, ok := unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	names, err := c.rolloutInformer.GetIndexer().IndexKeys(configMapIndex, m.GetNamespace()+"/"+m.GetName())
	if err != nil {
		return
	}
	for _, name := range names {
		c.queue.Add(name)
	}
}

func (c *Controller) addRollout(obj any) {
	if _, ok := unwrap(obj).(*v1alpha1.KubeletConfigRollout); ok {
		c.enqueueAll()
	}
}

func (c *Controller) updateRollout(oldObj, newObj any) {
	oldR, ok1 := unwrap(oldObj).(*v1alpha1.KubeletConfigRollout)
	newR, ok2 := unwrap(newObj).(*v1alpha1.KubeletConfigRollout)
	if !ok1 || !ok2 {
		return
	}
	if oldR.Generation != newR.Generation {
		// The selector may have changed: which Nodes are shared changes
		// for the others too.
		c.enqueueAll()
		return
	}
	c.queue.Add(newR.Name)
}

func (c *Controller) deleteRollout(obj any) {
	if r, ok := unwrap(obj).(*v1alpha1.KubeletConfigRollout); ok {
		// Its own sync finds it gone and forgets it.
		c.queue.Add(r.Name)
		c.enqueueAll()
	}
}

func (c *Controller) enqueueAll() {
	// A deleted rollout is no longer listed; its sync forgets it.
	for _, r := range c.rolloutsCached() {
		c.queue.Add(r.Name)
	}
}

// rolloutsCached lists the cached rollouts.
func (c *Controller) rolloutsCached() []*v1alpha1.KubeletConfigRollout {
	// The lister reads the informer's indexer, which cannot fail.
	out, _ := c.rolloutLister.List(labels.Everything())
	return out
}
