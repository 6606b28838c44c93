// Package kubeclient builds the agent's client from the kubelet's own
// kubeconfig, so the agent acts as system:node:NAME with no credentials of
// its own.
//
// # Waiting for TLS bootstrap
//
// On a new node the kubelet's kubeconfig, or the client certificate it
// names (typically /var/lib/kubelet/pki/kubelet-client-current.pem), does
// not exist until the kubelet's TLS bootstrap completes. WaitForConfig waits
// for both with exponential backoff (capped), logging what it waits for,
// instead of failing; meanwhile the agent runs from its checkpoints, and
// Status tells its /readyz what it waits for.
//
// # Certificate rotation
//
// The kubelet rotates its client certificate by writing a new file and
// moving the kubelet-client-current.pem symlink. Load reads the key pair
// once at start-up, into Credentials; New starts from it and reads the
// files again (by path, following the symlink) every ten seconds, as the kubelet does for
// its own connections; when they hold a new certificate, new connections
// present it and every open connection is closed, long-running watches
// included. client-go's own reload closes connections only every five
// minutes, and the apiserver checks a client certificate's expiry on every
// request, not once per connection: HTTP/2 keeps one connection open for
// hours, so a certificate that expires soon after its rotation would have
// the agent's requests refused until then. No restart is needed.
//
// # A small client
//
// Client speaks core/v1 only (Nodes, ConfigMaps, Pods, Events) through a REST
// client with a scheme that knows nothing else. client-go's kubernetes
// clientset, even one typed client of it, links and registers every API
// group of Kubernetes: about a third of the agent's memory at rest.
// Interface is satisfied by wrapping a clientset (kubeclienttest), so tests
// keep using client-go's fakes.
package kubeclient
