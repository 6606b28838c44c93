#!/usr/bin/env bash
# Builds the real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet that
# nodeguard's tests and `make run` start; fakecri, the kubelet's own fake container runtime
# served on a unix socket; a real container runtime for the nodes whose outcome is a cgroup or
# a process: containerd, ctr and containerd-shim-runc-v2 (hack/tools/containerd) and runc
# (hack/tools/runc; cgo, with libseccomp: Debian's libseccomp-dev, which .ci/run installs); and
# the two tools the tests run on what nodeguard ships: helm (the chart) and promtool (the alerts).
#
# They are built from the Go module proxy (hack/tools/*) rather than downloaded, and cached
# outside the repo so only the first run pays for the build. Each binary carries a stamp holding
# a hash of the module it was built from; a change to that module's go.mod (its tool block
# aside) or go.sum, or to this recipe, rebuilds it; anything else reuses it. A binary found
# without a stamp (put there by hand, say envtest's) is trusted as it is.
#
# Usage: hack/testbin.sh [etcd] [kube-apiserver] [kube-controller-manager] [kube-scheduler]
#                        [kubelet] [fakecri] [containerd] [ctr] [containerd-shim-runc-v2]
#                        [runc] [helm] [promtool]    (no argument: all)
# Prints the binary directory on stdout and progress on stderr, so that
#   NODEGUARD_BIN_DIR="$(hack/testbin.sh)"
# works. The directory is $NODEGUARD_BIN_DIR, else $XDG_CACHE_HOME/nodeguard/bin/<version>,
# else ~/.cache/nodeguard/bin/<version>; test/controlplane looks in the same place.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The version keys the cache directory; it is the one hack/tools/kube builds (test/controlplane
# has the same constant, and a test there checks the two agree).
kube_version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "${repo_root}/hack/tools/kube/go.mod")"
[[ -n "${kube_version}" ]] || { echo "testbin: no k8s.io/kubernetes requirement in hack/tools/kube/go.mod" >&2; exit 1; }
kube_major="$(cut -d. -f1 <<<"${kube_version#v}")"
kube_minor="$(cut -d. -f2 <<<"${kube_version}")"
# Bump when the build commands below change, so cached binaries are rebuilt. runtime_recipe is
# the container runtime's own (containerd, its shim, ctr, runc): bumping it rebuilds only those.
recipe=2
runtime_recipe=1
bin_dir="${NODEGUARD_BIN_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/nodeguard/bin/${kube_version}}"

# The tools modules are separate modules; a go.work elsewhere must not pull them together.
export GOWORK=off
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

log() { printf 'testbin: %s\n' "$*" >&2; }

die() {
	log "error: $*"
	exit 1
}

command -v go >/dev/null 2>&1 || die "go is not on PATH (Go 1.26 is needed; on CI it is /usr/local/go/bin)"

module_hash() {
	local dir="$1" package="$2" salt="$3"
	{
		echo "recipe=${recipe}"
		# Empty for the binaries that were built before the container runtime joined, so
		# that their stamps stay valid.
		if [[ -n "${salt}" ]]; then echo "${salt}"; fi
		# The tool block only lists the commands the module keeps; adding one to it changes
		# nothing any other is built from, so it must not rebuild them.
		sed '/^tool (/,/^)/d; /^tool /d' "${dir}/go.mod"
		cat "${dir}/go.sum"
		# A package of the tools module itself (etcd's main, fakecri) is built from its own
		# files too; for the Kubernetes binaries, go.sum pins everything that is built.
		if [[ "${package}" == .* ]]; then cat "${dir}/${package}"/*.go; fi
	} | sha256sum | cut -d' ' -f1
}

# ensure NAME MODULE_DIR PACKAGE ESTIMATE [GO BUILD FLAGS...]; $salt, when set, joins the hash.
ensure() {
	local name="$1" module_dir="$2" package="$3" estimate="$4"
	shift 4
	local binary="${bin_dir}/${name}" stamp="${bin_dir}/.${name}.stamp"
	local want
	want="$(module_hash "${module_dir}" "${package}" "${salt:-}")"

	if [[ -x "${binary}" ]]; then
		if [[ ! -f "${stamp}" ]]; then
			# A binary without a stamp was put there by hand (or by an earlier plain
			# `go build`): trust it rather than throw away minutes of build.
			echo "${want}" >"${stamp}"
			log "using existing ${binary}"
			return
		fi
		if [[ "$(cat "${stamp}")" == "${want}" ]]; then
			return
		fi
		log "${name} is out of date: ${module_dir#"${repo_root}"/} or this script changed since it was built"
	fi

	log "building ${name} (first run only, ${estimate})..."
	local tmp="${bin_dir}/.${name}.tmp.$$"
	trap 'rm -f "${tmp}"' EXIT
	local started=${SECONDS}
	(cd "${module_dir}" && go build "$@" -o "${tmp}" "${package}") || die "building ${name} failed"
	# Rename so that an interrupted build never leaves a half-written binary behind.
	mv -f "${tmp}" "${binary}"
	trap - EXIT
	echo "${want}" >"${stamp}"
	log "built ${binary} in $((SECONDS - started))s"
}

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
	targets=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet fakecri containerd ctr containerd-shim-runc-v2 runc helm promtool)
fi

# runc links libseccomp through cgo: say what is missing before a compiler error does.
need_libseccomp() {
	if ! pkg-config --exists libseccomp 2>/dev/null && [[ ! -e /usr/include/seccomp.h ]]; then
		die "runc needs libseccomp's headers: install Debian's libseccomp-dev (apt-get install libseccomp-dev; .ci/run does)"
	fi
}

mkdir -p "${bin_dir}"

# Two concurrent runs (say, two `make test`) would both spend minutes building; let one wait.
exec 9>"${bin_dir}/.lock"
if ! flock -n 9; then
	log "another testbin build holds ${bin_dir}/.lock; waiting for it..."
	flock 9
fi

for target in "${targets[@]}"; do
	case "${target}" in
	etcd) ensure etcd "${repo_root}/hack/tools/etcd" . "~1 min" ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubelet)
		# Without these the binary calls itself v0.0.0-master, as any plain `go build` of
		# Kubernetes does; upstream's release build sets the same variables.
		ensure "${target}" "${repo_root}/hack/tools/kube" "k8s.io/kubernetes/cmd/${target}" "~2-8 min" \
			-ldflags "-X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=${kube_major} -X k8s.io/component-base/version.gitMinor=${kube_minor} -X k8s.io/component-base/version.gitTreeState=clean"
		;;
	fakecri) ensure fakecri "${repo_root}/hack/tools/kube" ./cmd/fakecri "~20 s" ;;
	containerd | ctr | containerd-shim-runc-v2)
		# No build tags: upstream's release builds of containerd 2 need none on Linux.
		salt="runtime_recipe=${runtime_recipe}" ensure "${target}" "${repo_root}/hack/tools/containerd" \
			"github.com/containerd/containerd/v2/cmd/${target}" "~1-2 min"
		;;
	runc)
		need_libseccomp
		# seccomp: containerd's default profile needs it; urfave_cli_no_docs: upstream's
		# Makefile sets it too. Upstream's libpathrs tag is left out (it needs a Rust library).
		CGO_ENABLED=1 salt="runtime_recipe=${runtime_recipe}" ensure runc "${repo_root}/hack/tools/runc" \
			github.com/opencontainers/runc "~1 min" -tags "seccomp urfave_cli_no_docs"
		;;
	helm)
		# Each binary has a stamp of its own, over its own module: helm's go.mod moves
		# nothing the Kubernetes binaries are built from. The version is the one helm's
		# release build sets; without it `helm version` says v4.3.
		helm_version="$(awk '$1 == "helm.sh/helm/v4" { print $2; exit }' "${repo_root}/hack/tools/helm/go.mod")"
		[[ -n "${helm_version}" ]] || die "no helm.sh/helm/v4 requirement in hack/tools/helm/go.mod"
		# No -trimpath, as for the Kubernetes binaries: the k8s.io packages both are built
		# from (the same versions) then come from the build cache.
		ensure helm "${repo_root}/hack/tools/helm" helm.sh/helm/v4/cmd/helm "~3-5 min" \
			-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${helm_version}"
		;;
	promtool)
		# remove_all_sd leaves out every optional service discovery (AWS, Azure, GCE,
		# Consul, ...: most of Prometheus' dependencies), which `promtool check rules` and
		# `promtool test rules` never use.
		ensure promtool "${repo_root}/hack/tools/promtool" github.com/prometheus/prometheus/cmd/promtool "~3-4 min" \
			-tags remove_all_sd -ldflags "-s -w"
		;;
	*) die "unknown binary ${target} (want etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, fakecri, containerd, ctr, containerd-shim-runc-v2, runc, helm or promtool)" ;;
	esac
done

echo "${bin_dir}"
