// Package crd checks nodeguard's CustomResourceDefinitions: that the
// checked-in CRD (manifests/base/crd) and deep-copy functions are what
// controller-gen makes of the types in pkg/apis today, and the clientset,
// listers and informers (pkg/generated) what code-generator makes of them,
// and that a real kube-apiserver serving the CRD takes the
// KubeletConfigRollout example of docs/reference.md ("Pool rollouts"),
// defaults what it leaves out, and refuses each kind of bad spec with a
// message that says what is wrong.
package crd
