package contract

import corev1 "k8s.io/api/core/v1"

// ContainerKind says which list of a pod's spec a container is in.
type ContainerKind int

// The kinds of container, in the order VisitPodConfigMaps visits them.
const (
	InitContainer ContainerKind = iota
	RegularContainer
	EphemeralContainer
)

// String words the kind for a person: "init container", "container",
// "ephemeral container".
func (k ContainerKind) String() string {
	switch k {
	case InitContainer:
		return "init container"
	case RegularContainer:
		return "container"
	case EphemeralContainer:
		return "ephemeral container"
	}
	return "container"
}

// PodConfigMapUse is one place where a pod names a ConfigMap. A pod names
// ConfigMaps of its own namespace only.
type PodConfigMapUse struct {
	// Name is the ConfigMap's name as the pod spells it; it may be empty
	// in a pod the apiserver has not validated.
	Name string
	// Volume is the volume that names it; "" for a container's
	// environment. Projected is true for a source of a projected volume.
	Volume    string
	Projected bool
	// Container and ContainerKind name the container whose env or envFrom
	// names it; EnvVar is the variable for env, "" for envFrom.
	Container     string
	ContainerKind ContainerKind
	EnvVar        string
}

// VisitPodConfigMaps calls visit for every place the pod names a ConfigMap,
// the places the Node authorizer's graph counts (a node may read what the
// pods bound to it name): configMap volumes, the configMap sources of
// projected volumes, and env valueFrom.configMapKeyRef and
// envFrom.configMapRef of init, regular and ephemeral containers. Volumes
// come first, in order, then each kind of container in the order of
// ContainerKind, env before envFrom. It stops, and returns false, as soon
// as visit returns false. The graph, the webhook's pod rules and `kubectl
// nodeguard explain` all enumerate a pod's ConfigMaps with it, so that they
// agree on what a pod names.
func VisitPodConfigMaps(pod *corev1.Pod, visit func(PodConfigMapUse) bool) bool {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		// A volume has one source; both are looked at all the same, so that
		// nothing hides behind a spec the apiserver would refuse.
		if v.ConfigMap != nil && !visit(PodConfigMapUse{Name: v.ConfigMap.Name, Volume: v.Name}) {
			return false
		}
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ConfigMap != nil && !visit(PodConfigMapUse{Name: src.ConfigMap.Name, Volume: v.Name, Projected: true}) {
				return false
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !visitContainer(InitContainer, c.Name, c.Env, c.EnvFrom, visit) {
			return false
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !visitContainer(RegularContainer, c.Name, c.Env, c.EnvFrom, visit) {
			return false
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		if !visitContainer(EphemeralContainer, c.Name, c.Env, c.EnvFrom, visit) {
			return false
		}
	}
	return true
}

func visitContainer(kind ContainerKind, name string, env []corev1.EnvVar, envFrom []corev1.EnvFromSource, visit func(PodConfigMapUse) bool) bool {
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil &&
			!visit(PodConfigMapUse{Name: e.ValueFrom.ConfigMapKeyRef.Name, Container: name, ContainerKind: kind, EnvVar: e.Name}) {
			return false
		}
	}
	for _, e := range envFrom {
		if e.ConfigMapRef != nil && !visit(PodConfigMapUse{Name: e.ConfigMapRef.Name, Container: name, ContainerKind: kind}) {
			return false
		}
	}
	return true
}
