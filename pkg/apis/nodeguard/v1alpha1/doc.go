// Package v1alpha1 is version v1alpha1 of the nodeguard.dev API group: the
// KubeletConfigRollout, which rolls one eligible kubelet ConfigMap out across
// the Nodes a selector picks, a few at a time (docs/reference.md, "Pool rollouts").
//
// The CustomResourceDefinition in manifests/base/crd and the deep-copy
// functions in zz_generated.deepcopy.go are generated from these types by
// controller-gen (`make generate`); test/crd fails when either is out of
// date.
//
// The package holds the API only. The rollout's decisions are in
// pkg/rollout; the bookkeeping it keeps on Nodes is described on
// KubeletConfigRollout and in docs/rollouts.md.
//
// +kubebuilder:object:generate=true
// +groupName=nodeguard.dev
package v1alpha1

// controller-gen comes from its own module (hack/tools/controller-gen), so
// the product's go.mod does not carry it; test/crd runs the same generators.
//go:generate go tool -modfile=../../../../hack/tools/controller-gen/go.mod controller-gen object paths=. crd paths=. output:crd:dir=../../../../manifests/base/crd
