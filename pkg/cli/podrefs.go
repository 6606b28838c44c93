package cli

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// configMapUses lists where a pod refers to the ConfigMap name of its own
// namespace, in the places the node authorizer's graph counts: volumes,
// projected volume sources, and env and envFrom of init, regular and
// ephemeral containers. Each use is worded for a person, e.g.
// `container "app" env LOG_LEVEL`.
func configMapUses(pod *corev1.Pod, name string) []string {
	var uses []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			uses = append(uses, fmt.Sprintf("volume %q", v.Name))
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil && src.ConfigMap.Name == name {
					uses = append(uses, fmt.Sprintf("projected volume %q", v.Name))
					break
				}
			}
		}
	}
	visit := func(kind, container string, env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == name {
				uses = append(uses, fmt.Sprintf("%s %q env %s", kind, container, e.Name))
			}
		}
		for _, e := range envFrom {
			if e.ConfigMapRef != nil && e.ConfigMapRef.Name == name {
				uses = append(uses, fmt.Sprintf("%s %q envFrom", kind, container))
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		visit("init container", c.Name, c.Env, c.EnvFrom)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		visit("container", c.Name, c.Env, c.EnvFrom)
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		visit("ephemeral container", c.Name, c.Env, c.EnvFrom)
	}
	return uses
}
