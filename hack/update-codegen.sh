#!/usr/bin/env bash
# Generates the typed clientset (with its fake), listers and informers of the nodeguard.dev API
# (pkg/apis/nodeguard/v1alpha1) with k8s.io/code-generator into pkg/generated, or into the
# directory given as the only argument: test/crd generates into a temporary one and compares.
# `make generate` runs it through the go:generate line in pkg/apis/nodeguard/v1alpha1/doc.go.
#
# The generators are the `tool`s of hack/tools/code-generator, a module of its own so that the
# product's go.mod does not carry code-generator; `go tool` keeps the built binaries in the build
# cache. hack/boilerplate.go.txt, the header of every generated file, is empty: no file here
# carries a license header.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
out="${1:-pkg/generated}"

module=github.com/nodeguard/nodeguard
apis="${module}/pkg/apis"
generated="${module}/pkg/generated"
header=hack/boilerplate.go.txt

# GOWORK=off: the tools module stands alone, and a go.work a developer has must not decide which
# packages the generators load either.
gen() { GOWORK=off go tool -modfile=hack/tools/code-generator/go.mod "$@"; }

# Whatever a removed type or version left behind goes too.
rm -rf "${out}/clientset" "${out}/listers" "${out}/informers"

gen client-gen --go-header-file="${header}" \
	--input-base="${apis}" --input=nodeguard/v1alpha1 \
	--clientset-name=versioned \
	--output-dir="${out}/clientset" --output-pkg="${generated}/clientset"
gen lister-gen --go-header-file="${header}" \
	--output-dir="${out}/listers" --output-pkg="${generated}/listers" \
	"${apis}/nodeguard/v1alpha1"
gen informer-gen --go-header-file="${header}" \
	--versioned-clientset-package="${generated}/clientset/versioned" \
	--listers-package="${generated}/listers" \
	--output-dir="${out}/informers" --output-pkg="${generated}/informers" \
	"${apis}/nodeguard/v1alpha1"
