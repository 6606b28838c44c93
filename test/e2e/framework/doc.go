// Package framework starts what nodeguard's end-to-end tests and `make run`
// (hack/localup) run against: a real etcd and kube-apiserver
// (test/controlplane) whose authorization chain comes from
// manifests/control-plane, the objects of manifests/base applied to it, and
// the webhook built from cmd/webhook running as its own process with mutual
// TLS towards the apiserver (Start). Options.ControllerManager and
// Options.Scheduler add kube-controller-manager and kube-scheduler, for
// suites that need workloads turned into pods and bound, or Nodes of stopped
// kubelets marked Unknown (WaitNodeNotReady).
//
// On top of that it simulates nodes (StartNode): each registers its Node
// with its own client certificate, runs test/kubeletstub as its kubelet and
// the agent from cmd/agent beside it, with trial periods of seconds. The API
// returns errors rather than taking a testing.TB, so that programs use it as
// well as tests.
package framework
