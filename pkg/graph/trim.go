package graph

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The informers' caches would otherwise hold every field of every Node and
// bound Pod in the cluster. These transforms keep only what the graph reads,
// which is most of the webhook's memory in a large cluster.

// TrimNode is a cache.TransformFunc keeping a Node's identity, labels, the
// config-source annotation, the legacy spec.configSource and the kubelet
// version.
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Node{
		ObjectMeta: trimMeta(node.ObjectMeta),
		Spec:       corev1.NodeSpec{ConfigSource: node.Spec.ConfigSource},
	}
	if v, ok := node.Annotations[contract.ConfigSourceAnnotation]; ok {
		trimmed.Annotations = map[string]string{contract.ConfigSourceAnnotation: v}
	}
	trimmed.Status.NodeInfo.KubeletVersion = node.Status.NodeInfo.KubeletVersion
	return trimmed, nil
}

// TrimPod is a cache.TransformFunc keeping a Pod's identity, its node and
// only the parts of its spec that reference ConfigMaps.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Pod{ObjectMeta: trimMeta(pod.ObjectMeta)}
	trimmed.Spec.NodeName = pod.Spec.NodeName
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			trimmed.Spec.Volumes = append(trimmed.Spec.Volumes, corev1.Volume{
				VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: v.ConfigMap.LocalObjectReference}},
			})
		case v.Projected != nil:
			var sources []corev1.VolumeProjection
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: src.ConfigMap.LocalObjectReference}})
				}
			}
			if sources != nil {
				trimmed.Spec.Volumes = append(trimmed.Spec.Volumes, corev1.Volume{
					VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}},
				})
			}
		}
	}
	trimmed.Spec.InitContainers = trimContainers(pod.Spec.InitContainers)
	trimmed.Spec.Containers = trimContainers(pod.Spec.Containers)
	for _, c := range pod.Spec.EphemeralContainers {
		env, envFrom := trimEnv(c.Env, c.EnvFrom)
		// An ephemeral container is kept even without references so that
		// their count, which only grows, stays visible.
		trimmed.Spec.EphemeralContainers = append(trimmed.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Env: env, EnvFrom: envFrom}})
	}
	return trimmed, nil
}

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
		Labels:          m.Labels,
	}
}

func trimContainers(containers []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range containers {
		env, envFrom := trimEnv(c.Env, c.EnvFrom)
		if env != nil || envFrom != nil {
			out = append(out, corev1.Container{Env: env, EnvFrom: envFrom})
		}
	}
	return out
}

func trimEnv(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) ([]corev1.EnvVar, []corev1.EnvFromSource) {
	var keptEnv []corev1.EnvVar
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			keptEnv = append(keptEnv, corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: e.ValueFrom.ConfigMapKeyRef.LocalObjectReference}}})
		}
	}
	var keptFrom []corev1.EnvFromSource
	for _, e := range envFrom {
		if e.ConfigMapRef != nil {
			keptFrom = append(keptFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{
				LocalObjectReference: e.ConfigMapRef.LocalObjectReference}})
		}
	}
	return keptEnv, keptFrom
}
