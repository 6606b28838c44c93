package drain

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mirrorPodAnnotation marks the API's copy of a static pod; the kubelet
// owns it and the API cannot evict it.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// MustLeave says whether a pod bound to the Node must be gone before the
// kubelet restarts into a change that needs a drain, and if not, why it
// may stay. As `kubectl drain --ignore-daemonsets`: DaemonSet pods stay
// (their controller would put them straight back, and they tolerate the
// cordon), mirror pods stay (they are the kubelet's static pods), finished
// pods stay (they hold nothing the kubelet admits against); every other pod
// leaves, if Filter lets the drain evict it.
func MustLeave(pod *corev1.Pod) (bool, string) {
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return false, "finished"
	case pod.Annotations[mirrorPodAnnotation] != "":
		return false, "mirror pod"
	case isDaemonSetPod(pod):
		return false, "DaemonSet pod"
	}
	return true, ""
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet" && (ref.APIVersion == "apps/v1" || ref.APIVersion == "extensions/v1beta1")
}
