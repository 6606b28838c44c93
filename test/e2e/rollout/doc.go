// Package rollout holds end-to-end tests of the KubeletConfigRollout
// controller (cmd/rollout-controller) against a real kube-apiserver with
// kube-controller-manager, nodeguard's webhook in its admission and
// authorization chain, the CRD and RBAC from manifests/base, and real
// kubelets (fake CRI) with their agents: two leader-elected controller
// replicas, each with a token of the controller's ServiceAccount, move real
// Nodes, and the tests judge the outcome from what the Nodes' agents and
// kubelets report. The tests are in package rollout_test; this package has
// no code of its own.
package rollout
