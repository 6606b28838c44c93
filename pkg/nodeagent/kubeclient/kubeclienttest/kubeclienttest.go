// Package kubeclienttest backs kubeclient.Interface with a client-go
// clientset, typically k8s.io/client-go/kubernetes/fake, for tests. It links
// the whole clientset, so only tests import it; pkg/nodeagent's imports test
// keeps it out of the agent.
package kubeclienttest

import (
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
)

// Client is a clientset seen as kubeclient.Interface.
type Client struct{ kubernetes.Interface }

var _ kubeclient.Interface = Client{}

// Wrap returns clientset as a kubeclient.Interface.
func Wrap(clientset kubernetes.Interface) Client { return Client{clientset} }

// Nodes implements kubeclient.Interface.
func (c Client) Nodes() kubeclient.NodeClient { return c.CoreV1().Nodes() }

// ConfigMaps implements kubeclient.Interface.
func (c Client) ConfigMaps(namespace string) kubeclient.ConfigMapClient {
	return c.CoreV1().ConfigMaps(namespace)
}

// Pods implements kubeclient.Interface.
func (c Client) Pods(namespace string) kubeclient.PodClient { return c.CoreV1().Pods(namespace) }

// Events implements kubeclient.Interface.
func (c Client) Events(namespace string) kubeclient.EventClient { return c.CoreV1().Events(namespace) }

// IsWatchListSemanticsUnSupported passes on what the clientset says, so
// that informers over a fake clientset do not try to stream lists.
func (c Client) IsWatchListSemanticsUnSupported() bool {
	unsupported, ok := c.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && unsupported.IsWatchListSemanticsUnSupported()
}
