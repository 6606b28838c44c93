// Package noderestrictiondiff is a differential test of nodeguard's
// standalone admission rules (pkg/admission, for clusters without the
// in-tree NodeRestriction plugin) against that plugin itself,
// k8s.io/kubernetes v1.37.2's plugin/pkg/admission/noderestriction, as the
// oracle.
//
// It generates node writes to every resource NodeRestriction judges (Nodes,
// pods and their status and evictions, Leases, CSINodes,
// CertificateSigningRequests, ResourceSlices, service account tokens,
// PersistentVolumeClaim status, PodCertificateRequests), from a seed, and
// feeds each to both deciders over the same cluster state: the plugin
// through the apiserver's internal types and informer listers, as
// kube-apiserver runs it; nodeguard through an AdmissionReview's request,
// as the webhook receives it, with its lookups answered by a fake
// clientset holding the same objects. The objects are defaulted first, as
// the apiserver defaults them before admission. Every disagreement must be
// one the contract makes nodeguard stricter on (divergences.go, each
// named and explained); anything else fails, and prints the write.
//
// `make test` runs a short seed (TestDifferential); `make soak` runs it at
// length: NODEGUARD_DIFF_WRITES sets the number of writes,
// NODEGUARD_DIFF_SEED the seed (random when unset, printed either way).
//
// It is its own module, like hack/bench, so that the product's go.mod never
// depends on k8s.io/kubernetes.
package noderestrictiondiff
