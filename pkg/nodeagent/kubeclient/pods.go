package kubeclient

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// ListNodePods lists the pods bound to Node nodeName, across namespaces,
// with fieldSelector spec.nodeName=NODE: what the kubelet itself watches,
// and the only pod list the node authorizer allows a node, so it needs no
// permission beyond the kubelet's.
func ListNodePods(ctx context.Context, pods PodClient, nodeName string) ([]*corev1.Pod, error) {
	list, err := pods.List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pods bound to Node %s: %w", nodeName, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
