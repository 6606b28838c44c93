// Package controlplane runs a real etcd and kube-apiserver on loopback, for nodeguard's tests
// and for `make run`, and on request kube-controller-manager and kube-scheduler beside them
// (Options.ControllerManager, Options.Scheduler), each with its own client certificate.
//
// The binaries are built from the Go module proxy by hack/testbin.sh (`make testbin`) into a
// cache directory outside the repository (see DefaultBinDir). Every control plane gets free
// ports, its own throwaway CA, a service account key and a work directory holding its
// certificates, etcd data and logs. Identities are client certificates from that CA, so a
// test can act as any user or node: see AdminConfig, UserConfig and NodeConfig.
//
// WriteAuthorizationFiles turns the shipped manifests/control-plane files into an
// authorization configuration that points the apiserver at a local nodeguard webhook, so
// tests run the authorization chain users install, not a copy of it.
package controlplane
