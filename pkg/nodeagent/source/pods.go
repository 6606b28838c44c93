package source

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
)

// listPods lists the pods bound to the Node. The trial calls it only
// around a restart and once a probe period during a trial, so the agent
// keeps no pod watch open: outside trials, which is nearly always, it
// costs the apiserver nothing.
func (s *Source) listPods(ctx context.Context) ([]*corev1.Pod, error) {
	return kubeclient.ListNodePods(ctx, s.client.Pods(metav1.NamespaceAll), s.nodeName)
}
