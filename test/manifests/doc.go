// Package manifests renders nodeguard's kustomize manifests the way
// `kubectl apply -k` would and applies them to a cluster, so that tests and
// `make run` install exactly what operators install.
//
// Its tests check the rendered base and the overlays (cert-manager,
// static-certs with a bundle from pkg/certs) against the invariants an
// installation depends on: what the admission webhooks judge and how they
// fail, how the webhook's pods run and are reached, the RBAC, the policy
// file, the agent's access to the node, the certificates' chain, and the
// control plane's AuthorizationConfiguration. Every invariant comes with
// ways to break it, and the test shows the check failing on each, so that no
// check passes vacuously. TestOverlaysApply applies the overlays to a real
// kube-apiserver; TestRolloutControllerTokenIsConfined tries, on one, every
// Node write the rollout controller's own token could make against the
// shipped ValidatingAdmissionPolicy; TestStandaloneOverlay checks what the
// standalone one adds.
package manifests
