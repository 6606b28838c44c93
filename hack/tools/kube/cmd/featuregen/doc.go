// Command featuregen writes pkg/kubeletconfig/featuregates_generated.go of the
// root module: the history of every feature gate a kubelet of the pinned
// k8s.io/kubernetes release registers, as plain Go data.
//
// The root module must not depend on k8s.io/kubernetes (its feature specs live
// in an unexported map of k8s.io/kubernetes/pkg/features), so the table is
// generated here, in the tools module that already requires it, and committed.
// The gates come from the same registrations the kubelet binary performs:
// importing k8s.io/kubernetes/pkg/features fills
// k8s.io/apiserver/pkg/util/feature.DefaultMutableFeatureGate with the
// Kubernetes, client-go, generic apiserver, apiextensions and zpages gates; the
// kubelet adds the logging gates (cmd/kubelet/app/server.go) and the metrics
// gates (pkg/kubelet/server/server.go), and so does this command.
//
// Usage, from hack/tools/kube:
//
//	go run ./cmd/featuregen -o ../../../pkg/kubeletconfig/featuregates_generated.go
//	go run ./cmd/featuregen            # writes the file to stdout
//
// The output depends only on the pinned module versions: gates and their
// stages are sorted, and the file is gofmt-formatted.
package main
