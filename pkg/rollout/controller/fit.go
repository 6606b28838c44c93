package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// unfit is rollout.Input.Unfit: for each selected Node not assigned the
// target, why the target would leave it unable to hold the pods bound to
// it, when it would.
func (c *Controller) unfit(ctx context.Context, target *contract.ConfigMapVersion, nodes []*corev1.Node, observations []rollout.NodeObservation) map[string]string {
	if target == nil {
		return nil
	}
	pending := map[string]bool{}
	for _, obs := range observations {
		if !obs.Assigned || obs.Assignment.ConfigMap != (contract.ConfigMapRef{Namespace: target.Namespace, Name: target.Name}) {
			pending[obs.Name] = true
		}
	}
	if len(pending) == 0 {
		return nil
	}
	cfg := c.targets.get(ctx, *target)
	if cfg == nil {
		return nil
	}
	out := map[string]string{}
	for _, node := range nodes {
		if !pending[node.Name] {
			continue
		}
		objs, err := c.podInformer.GetIndexer().ByIndex(nodeNameIndex, node.Name)
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
			klog.FromContext(ctx).V(2).Info("Cannot tell whether the target fits a Node", "node", node.Name, "err", err)
			continue
		}
		if why != "" {
			out[node.Name] = why
		}
	}
	return out
}
