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
// instead of failing; meanwhile the agent runs from its checkpoints.
//
// # Certificate rotation
//
// The kubelet rotates its client certificate by writing a new file and
// moving the kubelet-client-current.pem symlink. The client here keeps the
// certificate as file paths (never inlined), which makes client-go reload
// them: every new TLS connection reads the files again (at most once a
// second), following the symlink, and a background check every five
// minutes closes open connections once the certificate has changed, so
// long-running watches move to the new certificate too. No restart is
// needed.
package kubeclient
