package graph

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func isEligible(labels map[string]string) bool { return contract.IsEligible(labels) }

// nodeInfoFrom takes from a Node what decisions need.
func nodeInfoFrom(node *corev1.Node) *NodeInfo {
	info := &NodeInfo{
		Name:            node.Name,
		ResourceVersion: node.ResourceVersion,
		Labels:          node.Labels,
		KubeletVersion:  node.Status.NodeInfo.KubeletVersion,
	}
	if info.KubeletVersion == "" {
		info.VersionError = "node reports no kubelet version"
	} else if v, err := version.ParseGeneric(info.KubeletVersion); err != nil {
		info.VersionError = err.Error()
	} else {
		info.ParsedKubeletVersion = v
		info.VersionParts = [3]uint{v.Major(), v.Minor(), v.Patch()}
	}
	assignment, ok, err := contract.AssignmentOf(node)
	switch {
	case err != nil:
		info.AssignmentError = err.Error()
	case ok:
		info.Assignment = &assignment
	}
	return info
}

func assignedConfigMap(info *NodeInfo) *objectKey {
	if info == nil || info.Assignment == nil {
		return nil
	}
	ref := info.Assignment.ConfigMap
	return &objectKey{namespace: ref.Namespace, name: ref.Name}
}

// podConfigMaps lists, sorted and without repeats, the ConfigMaps a pod
// references (contract.VisitPodConfigMaps: volumes, projected volumes, and
// env and envFrom in every kind of container).
func podConfigMaps(pod *corev1.Pod) []objectKey {
	var names []string
	contract.VisitPodConfigMaps(pod, func(use contract.PodConfigMapUse) bool {
		if use.Name != "" {
			names = append(names, use.Name)
		}
		return true
	})
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	keys := make([]objectKey, len(names))
	for i, n := range names {
		keys[i] = objectKey{namespace: pod.Namespace, name: n}
	}
	return keys
}
