// Package install installs nodeguard as an operator does and checks that it
// runs: the images `make images` builds, referenced through the images
// component it writes, and manifests/base applied with server-side apply to a
// control plane with kube-controller-manager and kube-scheduler and three
// real kubelets on the kubelet's own fake container runtime.
//
// Every workload the manifests ship (the webhook's and the rollout
// controller's Deployments, the agent's DaemonSet) must be admitted by the
// apiserver, whose own Pod Security admission enforces each namespace's
// level; get its pods from the controllers, bound by the scheduler; and reach
// Running, with exactly the image references the build produced. The
// PodDisruptionBudget must count the webhook's pods.
//
// Two things differ from a real cluster, for want of a Service network: the
// ValidatingWebhookConfiguration points at a webhook process beside the
// apiserver (as in every e2e suite), and the pods' containers do not execute
// (the fake runtime runs nothing), so the pods are Running but their probes
// fail. The webhook's Secrets are minted with pkg/certs and created as the
// static-certs overlay would.
package install
