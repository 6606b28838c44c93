package cli

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// configMapUses lists where a pod refers to the ConfigMap name of its own
// namespace, in the places the node authorizer's graph counts
// (contract.VisitPodConfigMaps). Each use is worded for a person, e.g.
// `container "app" env LOG_LEVEL`; a projected volume is named once,
// however many of its sources name the ConfigMap.
func configMapUses(pod *corev1.Pod, name string) []string {
	var uses []string
	contract.VisitPodConfigMaps(pod, func(use contract.PodConfigMapUse) bool {
		if use.Name != name {
			return true
		}
		switch {
		case use.Projected:
			// A volume's sources come one after the other: name the
			// volume once.
			projected := fmt.Sprintf("projected volume %q", use.Volume)
			if n := len(uses); n == 0 || uses[n-1] != projected {
				uses = append(uses, projected)
			}
		case use.Volume != "":
			uses = append(uses, fmt.Sprintf("volume %q", use.Volume))
		case use.EnvVar != "":
			uses = append(uses, fmt.Sprintf("%s %q env %s", use.ContainerKind, use.Container, use.EnvVar))
		default:
			uses = append(uses, fmt.Sprintf("%s %q envFrom", use.ContainerKind, use.Container))
		}
		return true
	})
	return uses
}
