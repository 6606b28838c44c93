// Command localup is what `make run` runs: a real etcd and kube-apiserver on
// loopback with nodeguard wired in exactly as manifests/ describe, the
// webhook, and three simulated nodes (the agent beside a stand-in kubelet,
// each with its node client certificate). It then tells the story an
// operator cares about, printing `kubectl nodeguard status` at each step:
// a configuration assigned to a pool goes active, then last-known-good; a
// bad one is rolled back with the reason; a node is refused another node's
// ConfigMap and labelling itself into a pool, and a too-old kubelet is
// refused; a change a restart cannot carry (the static CPU manager policy)
// goes across the pool through a drain of each node, while a Deployment
// under a PodDisruptionBudget moves between them (kube-scheduler places
// its pods); and what "active" means: an assignment a kubelet flag shadows
// fails its trial naming the flag, and the kubelet's own configuration is
// read through the apiserver (kubectl get --raw
// /api/v1/nodes/NODE/proxy/configz). The cluster then stays up for
// poking at until Ctrl-C (or exits, with --demo-only). Every process and
// temporary file goes away on exit, on Ctrl-C and on failure alike.
package main
