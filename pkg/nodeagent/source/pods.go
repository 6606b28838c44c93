package source

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
)

// podInformer lists and watches the pods bound to the Node, across
// namespaces, with fieldSelector spec.nodeName=NODE: what the kubelet
// itself watches, and the only pod list the node authorizer allows a node.
// It needs no permission beyond the kubelet's.
func podInformer(client kubeclient.Interface, nodeName string) cache.SharedIndexInformer {
	informer := selectedInformer(podLister(client), fields.OneTermEqualSelector("spec.nodeName", nodeName).String(), &corev1.Pod{})
	// A node runs up to a few hundred pods, and a pod carries much the
	// trial never reads (env, volumes, probes, container statuses). The
	// cache keeps only what the signals judge, so watching costs the agent
	// little memory.
	_ = informer.SetTransform(func(obj any) (any, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		return slimPod(pod), nil
	})
	return informer
}

// slimPod keeps what pkg/nodeagent/trial reads of a pod: its identity and
// whether it is being deleted, its restart policy, its phase with the
// kubelet's reason and message, and what it requests.
func slimPod(pod *corev1.Pod) *corev1.Pod {
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, RestartPolicy: pod.Spec.RestartPolicy,
			Overhead: pod.Spec.Overhead, Resources: pod.Spec.Resources},
		Status: corev1.PodStatus{
			Phase: pod.Status.Phase, Reason: pod.Status.Reason, Message: pod.Status.Message,
		},
	}
	slim.Spec.Containers = slimContainers(pod.Spec.Containers)
	slim.Spec.InitContainers = slimContainers(pod.Spec.InitContainers)
	return slim
}

func slimContainers(containers []corev1.Container) []corev1.Container {
	if len(containers) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(containers))
	for i, c := range containers {
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
	}
	return out
}

// boundPods returns the pods bound to the Node as last seen, and whether
// that is the complete list (watched, and listed at least once).
func (s *Source) boundPods() ([]*corev1.Pod, bool) {
	if s.pods == nil || !s.pods.HasSynced() {
		return nil, false
	}
	objs := s.pods.GetStore().List()
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods, true
}
