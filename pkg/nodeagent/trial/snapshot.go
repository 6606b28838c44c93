package trial

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Snapshot is what the agent sees of its Node and the pods bound to it at
// one moment. The signals compare two of them: one taken just before the
// kubelet's restart (the baseline) and the latest.
type Snapshot struct {
	// Conditions are the Node's conditions by type.
	Conditions map[corev1.NodeConditionType]Condition
	// Allocatable is the Node's status.allocatable.
	Allocatable corev1.ResourceList
	// PodsKnown is false when the pods bound to the Node could not be read
	// (not watched, or the watch has not listed them yet): the pod signals
	// then have nothing to judge.
	PodsKnown bool
	// Pods are the pods bound to the Node, by UID.
	Pods map[types.UID]Pod
}

// Condition is one Node condition.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Pod is what the signals need of a pod.
type Pod struct {
	Namespace string
	Name      string
	Phase     corev1.PodPhase
	// Reason and Message are the pod's status.reason and status.message:
	// the kubelet writes them when it rejects a pod at admission or evicts
	// it.
	Reason  string
	Message string
	// Requests is what the pod requests, as the kubelet's admission
	// counts it (see podRequests).
	Requests corev1.ResourceList
	// RestartAlways is spec.restartPolicy Always (the default): such a
	// pod never ends on its own.
	RestartAlways bool
	// Deleting is set once the pod is being deleted.
	Deleting bool
}

// Terminal reports a pod that is over: it holds no resources any more.
func (p Pod) Terminal() bool {
	return p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed
}

// NewSnapshot takes a snapshot of node and the pods bound to it; podsKnown
// says whether pods is the complete list.
func NewSnapshot(node *corev1.Node, pods []*corev1.Pod, podsKnown bool) Snapshot {
	s := Snapshot{Conditions: map[corev1.NodeConditionType]Condition{}, PodsKnown: podsKnown}
	if node != nil {
		for _, c := range node.Status.Conditions {
			s.Conditions[c.Type] = Condition{Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
		s.Allocatable = node.Status.Allocatable.DeepCopy()
	}
	if podsKnown {
		s.Pods = make(map[types.UID]Pod, len(pods))
		for _, p := range pods {
			s.Pods[p.UID] = Pod{
				Namespace: p.Namespace, Name: p.Name, Phase: p.Status.Phase,
				Reason: p.Status.Reason, Message: p.Status.Message, Requests: podRequests(p),
				RestartAlways: p.Spec.RestartPolicy == "" || p.Spec.RestartPolicy == corev1.RestartPolicyAlways,
				Deleting:      p.DeletionTimestamp != nil,
			}
		}
	}
	return s
}

// clone copies the parts of s that ObserveNode may replace.
func (s Snapshot) clone() Snapshot {
	s.Conditions = maps.Clone(s.Conditions)
	s.Pods = maps.Clone(s.Pods)
	return s
}

// podRequests is what a pod requests, as the kubelet's admission and the
// scheduler count it (k8s.io/component-helpers, which both use): pod-level
// requests where set, else its containers with sidecar and init rules,
// plus its overhead. The spec is what a restarted kubelet admits against,
// so resizes reported in the status are not considered.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// requested sums what the pods that still hold resources request; for
// "pods", it counts them.
func requested(pods map[types.UID]Pod, name corev1.ResourceName) resource.Quantity {
	var sum resource.Quantity
	if name == corev1.ResourcePods {
		n := 0
		for _, p := range pods {
			if !p.Terminal() {
				n++
			}
		}
		return *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	for _, p := range pods {
		if q, ok := p.Requests[name]; ok && !p.Terminal() {
			sum.Add(q)
		}
	}
	return sum
}
