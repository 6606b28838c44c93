package source

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// listPods lists the pods bound to the Node, across namespaces, with
// fieldSelector spec.nodeName=NODE: what the kubelet itself watches, and
// the only pod list the node authorizer allows a node. It needs no
// permission beyond the kubelet's. The trial calls it only around a
// restart and once a probe period during a trial, so the agent keeps no
// pod watch open: outside trials, which is nearly always, it costs the
// apiserver nothing.
func (s *Source) listPods(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := s.client.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pods bound to Node %s: %w", s.nodeName, err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}
