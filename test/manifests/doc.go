// Package manifests renders nodeguard's kustomize manifests the way
// `kubectl apply -k` would and applies them to a cluster, so that tests and
// `make run` install exactly what operators install.
package manifests
