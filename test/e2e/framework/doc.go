// Package framework starts what nodeguard's end-to-end tests run against: a
// real etcd and kube-apiserver (test/controlplane) whose authorization chain
// comes from manifests/control-plane, the objects of manifests/base applied
// to it, and the webhook built from cmd/webhook running as its own process
// with mutual TLS towards the apiserver.
package framework
