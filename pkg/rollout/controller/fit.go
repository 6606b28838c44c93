package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/podfit"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// What the controller reads to report, before anything moves, the Nodes a
// target would leave unable to hold their pods (rollout.Input.Unfit): the
// pods bound to Nodes, and the target's configuration.

// nodeNameIndex indexes pods by the Node they are bound to.
const nodeNameIndex = "spec.nodeName"

// boundPods selects the pods that hold a Node's resources: bound, not over.
var boundPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector("spec.nodeName", ""),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
).String()

// newPodInformer watches the pods bound to Nodes, each kept as little more
// than its Node and what it requests (slimPod), indexed by Node.
func newPodInformer(kube kubernetes.Interface) (informers.SharedInformerFactory, cache.SharedIndexInformer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(slimPod),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = boundPods }))
	informer := factory.Core().V1().Pods().Informer()
	err := informer.AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	return factory, informer, err
}

// slimPod keeps of a pod its identity, its Node, its phase and what it
// requests (pkg/podfit), as the requests of one container: a cluster's
// pods cost the controller a few hundred bytes each.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, Containers: []corev1.Container{{Name: "requests",
			Resources: corev1.ResourceRequirements{Requests: podfit.Requests(pod)}}}},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}, nil
}

// targetConfigs caches the decoded configuration of the targets, by
// version: one read of each version, however many syncs.
type targetConfigs struct {
	mu     sync.Mutex
	byRef  map[contract.ConfigMapVersion]*kubeletconfigv1beta1.KubeletConfiguration
	client kubernetes.Interface
}

// get reads and decodes the target's configuration; nil when it cannot
// (the target moved on since, it does not decode): the report is then
// left out, the agents judge as ever.
func (t *targetConfigs) get(ctx context.Context, target contract.ConfigMapVersion) *kubeletconfigv1beta1.KubeletConfiguration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cfg, ok := t.byRef[target]; ok {
		return cfg
	}
	cm, err := t.client.CoreV1().ConfigMaps(target.Namespace).Get(ctx, target.Name, metav1.GetOptions{})
	if err != nil || string(cm.UID) != target.UID || cm.ResourceVersion != target.ResourceVersion {
		klog.FromContext(ctx).V(2).Info("Reading the target's configuration failed; not reporting unfit Nodes", "target", target, "err", err)
		return nil
	}
	cfg, err := kubeletconfig.DecodeConfigMap(cm)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("The target's configuration does not decode; not reporting unfit Nodes", "target", target, "err", err)
		cfg = nil
	}
	if len(t.byRef) >= 16 {
		clear(t.byRef)
	}
	t.byRef[target] = cfg
	return cfg
}

// fits is a rollout's report of the Nodes its target would leave unable to
// hold their pods, kept as the Nodes and their pods change: each Node is
// fitted again when its reading or its capacity changes or a pod bound to
// it does, every Node when the target changes. Only the sync reads and
// writes it, but stale, which the pod handler marks, under the
// rolloutState's mu.
type fits struct {
	// target is what why was made against; unfit Nodes are in why, and
	// capacity is the capacity each Node was last fitted with.
	target   *contract.ConfigMapVersion
	why      map[string]string
	capacity map[string]corev1.ResourceList
	// stale are the Nodes whose pods changed since.
	stale sets.Set[string]
}

func newFits() fits {
	return fits{why: map[string]string{}, capacity: map[string]corev1.ResourceList{}, stale: sets.New[string]()}
}

// podsChanged marks a Node whose bound pods changed, for the next sync to
// fit again. Pods wake no rollout: they only refine a report.
func (st *rolloutState) podsChanged(node string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.fits.stale.Insert(node)
}

// takeStaleFits returns the Nodes whose pods changed since it was last
// called.
func (st *rolloutState) takeStaleFits() sets.Set[string] {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.fits.stale
	st.fits.stale = sets.New[string]()
	return out
}

// podEvent marks the Node a pod is bound to for every rollout.
func (c *Controller) podEvent(obj any) {
	pod, ok := unwrap(obj).(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	c.statesMu.Lock()
	defer c.statesMu.Unlock()
	for _, st := range c.states {
		st.podsChanged(pod.Spec.NodeName)
	}
}

// unfit is rollout.Input.Unfit: for each selected Node not assigned the
// target, why the target would leave it unable to hold the pods bound to
// it, when it would. It fits again the Nodes read into the pool whose
// reading or capacity changed, and those whose pods changed; all of them
// when the target changed.
func (c *Controller) unfit(ctx context.Context, st *rolloutState, target *contract.ConfigMapVersion, read poolRead) map[string]string {
	f := &st.fits
	stale := read.changed.Union(st.takeStaleFits())
	for name, node := range read.nodes {
		if !equality.Semantic.DeepEqual(f.capacity[name], node.Status.Capacity) {
			stale.Insert(name)
		}
	}
	if target == nil {
		f.target = nil
		return nil
	}
	if f.target == nil || *f.target != *target {
		clear(f.why)
		stale = sets.New(st.pool.Names()...)
	}
	cfg := c.targets.get(ctx, *target)
	if cfg == nil {
		// Nothing to report until it can be read: fitted afresh then.
		f.target = nil
		return nil
	}
	kept := *target
	f.target = &kept
	ref := contract.ConfigMapRef{Namespace: target.Namespace, Name: target.Name}
	for name := range stale {
		delete(f.why, name)
		delete(f.capacity, name)
		obs, ok := st.pool.Observation(name)
		node := c.cachedNode(name)
		if !ok || node == nil {
			continue
		}
		// Recorded for a Node assigned the target too, so that its
		// heartbeats do not have it fitted again: it is fitted when its
		// reading changes (a revert), or its capacity.
		f.capacity[name] = node.Status.Capacity
		if obs.Assigned && obs.Assignment.ConfigMap == ref {
			continue
		}
		objs, err := c.podInformer.GetIndexer().ByIndex(nodeNameIndex, name)
		if err != nil {
			continue
		}
		var requests []corev1.ResourceList
		for _, obj := range objs {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				requests = append(requests, podfit.Requests(pod))
			}
		}
		why, err := rollout.WouldNotFit(cfg, node, requests)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot tell whether the target fits a Node", "node", name, "err", err)
			continue
		}
		if why != "" {
			f.why[name] = why
		}
	}
	return f.why
}
