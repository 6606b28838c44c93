// k8s.io/code-generator's client-gen, lister-gen and informer-gen, which hack/update-codegen.sh
// runs with `go tool -modfile=` this file to generate pkg/generated from pkg/apis, in a module of
// its own so that the product's go.mod does not carry code-generator. Keep its version at the
// product's k8s.io/client-go, whose packages the generated code calls.
module github.com/nodeguard/nodeguard/hack/tools/code-generator

go 1.26.0

tool (
	k8s.io/code-generator/cmd/client-gen
	k8s.io/code-generator/cmd/informer-gen
	k8s.io/code-generator/cmd/lister-gen
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/mod v0.37.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	golang.org/x/tools v0.47.0 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/code-generator v0.37.2 // indirect
	k8s.io/gengo/v2 v2.0.0-20260408192533-25e2208e0dc3 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
)
