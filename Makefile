# nodeguard. The two commands that matter: `make run` (a local control plane with nodeguard in
# it) and `make test` (everything CI checks; .ci/run calls it).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
GOFMT ?= gofmt
# A checkout without .git (CI tarballs) must still build.
export GOFLAGS ?= -buildvcs=false
# The first run builds kube-apiserver and the kubelet (several minutes) before any test starts; a test that
# starts control planes takes seconds each, but on two cores they add up.
TEST_TIMEOUT ?= 30m
# Arguments for `make run`, e.g. make run ARGS='--help'.
ARGS ?=

# Modules nested under hack/ (hack/tools/etcd, hack/tools/kube, ...) are separate modules that
# `./...` in the root does not reach.
NESTED_MODULES := $(sort $(patsubst %/go.mod,%,$(shell find hack -mindepth 2 -name go.mod -not -path '*/testdata/*')))

.PHONY: build test testbin bench soak fuzz run lint generate certs images push clean help

## build: compile every command under cmd/ into bin/.
build:
	$(GO) build -o bin/ ./cmd/...

## test: lint, make sure the test binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet, fakecri, containerd, runc, helm, promtool) are built, then run all tests (the chart linted and rendered against the overlays, installed with helm; the alerts under promtool), then fuzz briefly.
test: lint testbin
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	@for module in $(NESTED_MODULES); do \
		[[ -n "$$(cd "$$module" && GOWORK=off $(GO) list ./... 2>/dev/null)" ]] || continue; \
		echo "go test in $$module"; \
		(cd "$$module" && GOWORK=off $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...); \
	done
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

# Every decoder of untrusted input has a fuzz target. FUZZTIME is a duration or a count of
# inputs (Nx); `make test` runs each target for TEST_FUZZTIME inputs. A count, because Go 1.26's
# fuzz coordinator can end a duration-bounded run with a spurious "context deadline exceeded"
# and no failing input (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 10s
TEST_FUZZTIME ?= 20000x
FUZZ_TARGETS := \
	./pkg/server:FuzzDecodeAdmissionReview \
	./pkg/server:FuzzValidate \
	./pkg/server:FuzzDecodeSubjectAccessReview \
	./pkg/kubeletconfig:FuzzDecode \
	./pkg/settings:FuzzParse \
	./pkg/nodeagent/checkpoint:FuzzDecodeEnvelope \
	./pkg/server:FuzzPeekAdmissionUID

## fuzz: run every fuzz target for FUZZTIME (e.g. make fuzz FUZZTIME=5m, or FUZZTIME=100000x).
fuzz:
	@for target in $(FUZZ_TARGETS); do \
		pkg="$${target%%:*}"; name="$${target##*:}"; \
		echo "fuzzing $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" || exit 1; \
	done

## testbin: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet, fakecri, containerd (with ctr and its runc shim), runc, helm and promtool into the cache (only when missing or out of date).
testbin:
	hack/testbin.sh >/dev/null

## bench: nodeguard's authorizer against the in-tree Node authorizer's graph (hack/bench, its own
## module), the shipped policies beside a stock OPA server (hack/bench/cmd/opacompare; builds opa
## from the module proxy into ~/.cache/nodeguard/opa once), HTTPS load on /authorize and /validate,
## then the Go benchmarks of the hot paths; each prints figures against the targets in
## docs/benchmarks.md. About 15 minutes on two cores once built. BENCH_ARGS go to the graph
## comparison and OPA_BENCH_ARGS to the OPA one, e.g. BENCH_ARGS=--fail-on-miss.
BENCH_ARGS ?=
OPA_BENCH_ARGS ?=
bench:
	cd hack/bench && GOWORK=off $(GO) run ./cmd/compare $(BENCH_ARGS)
	cd hack/bench && GOWORK=off $(GO) run ./cmd/opacompare $(OPA_BENCH_ARGS)
	$(GO) test -run '^$$' -bench 'Authorize|Validate' -timeout $(TEST_TIMEOUT) ./test/loadtest
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/graph ./pkg/authz ./pkg/admission ./pkg/kubeletconfig ./pkg/policy

## soak: the long versions of the reliability tests (NODEGUARD_SOAK=1, docs/reliability.md): 10
## minutes of traffic and cluster churn with heap and goroutines bounded, 1000 SIGKILLs of the
## agent, 20 rolling restarts, a long overload and certificate rotations; first, 5 million generated
## node writes judged by nodeguard and by the in-tree NodeRestriction plugin (hack/noderestriction-diff,
## NODEGUARD_DIFF_SEED reruns a seed). About 35 minutes.
DIFF_WRITES ?= 5000000
soak: testbin
	cd hack/noderestriction-diff && GOWORK=off NODEGUARD_DIFF_WRITES=$(DIFF_WRITES) $(GO) test -count=1 -timeout 60m -v -run 'TestDifferential' ./...
	NODEGUARD_SOAK=1 $(GO) test -count=1 -timeout 60m -v -run 'TestSoak' ./test/e2e/faults/
	NODEGUARD_SOAK=1 $(GO) test -count=1 -timeout 60m -v -run 'TestPowerLoss' ./test/e2e/agent/
	NODEGUARD_SOAK=1 $(GO) test -count=1 -timeout 60m -v -run 'TestRollingRestartUnderLoad|TestCertificateRotationUnderLoad' ./test/e2e/reliability/
	NODEGUARD_SOAK=1 $(GO) test -count=1 -timeout 60m -v -run 'TestOverload' ./test/loadtest/

## scale: kubelets' routine traffic at scale (test/scale, docs/benchmarks.md): simulated kubelets against a
## real kube-apiserver with nodeguard as manifests/ ship it, with the opt-in minimum-version authorization, not installed, and with its webhook down; not part
## of `make test`. SCALE_ARGS go to the harness, e.g. SCALE_ARGS='--nodes=1000 --window=2m' (--help lists them).
SCALE_ARGS ?=
.PHONY: scale
scale: testbin
	$(GO) run ./test/scale/cmd/scale $(SCALE_ARGS)

## rollout-scale: a KubeletConfigRollout over 1,000 simulated kubelets with simulated agents, against the rollout
## controller as its own process (test/scale --rollout, docs/benchmarks.md); not part of `make test`, where a 30-node
## version runs, as is and drain-class. ROLLOUT_SCALE_ARGS go to the harness and win, e.g.
## ROLLOUT_SCALE_ARGS='--nodes=5000' (kubelets made lighter above 1,000 Nodes; the report says how), '--drain
## --drain-time=2s' for a drain-class rollout, '--api-priority' with manifests/components/api-priority installed,
## '--controller-binary=/tmp/rc-before' for a controller built from another tree, or '--status-period=5m' for kubelets
## that patch their status at the kubelet's default report frequency.
ROLLOUT_SCALE_ARGS ?=
.PHONY: rollout-scale
rollout-scale: testbin
	$(GO) run ./test/scale/cmd/scale --rollout --nodes=1000 $(ROLLOUT_SCALE_ARGS)

## run: start a local control plane with nodeguard installed (see hack/localup).
run: testbin
	$(GO) run ./hack/localup $(ARGS)

# Arguments for `make certs`, e.g. make certs CERTS_ARGS='--extra-ip=10.96.0.40'.
CERTS_ARGS ?=
## certs: mint the webhook's and kube-apiserver's certificates into manifests/overlays/static-certs/certs (docs/install.md).
certs:
	$(GO) run ./cmd/nodeguard-certs $(CERTS_ARGS)

## lint: gofmt must have nothing to say, go vet must pass, scripts must parse.
lint:
	@unformatted="$$($(GOFMT) -l .)"; \
	if [[ -n "$$unformatted" ]]; then \
		echo "gofmt -l lists files that need formatting (run gofmt -w on them):"; \
		echo "$$unformatted"; \
		exit 1; \
	fi
	$(GO) vet ./...
	@for module in $(NESTED_MODULES); do \
		[[ -n "$$(cd "$$module" && GOWORK=off $(GO) list ./... 2>/dev/null)" ]] || continue; \
		echo "go vet in $$module"; \
		(cd "$$module" && GOWORK=off $(GO) vet ./...); \
	done
	@for script in hack/testbin.sh hack/update-codegen.sh .ci/run; do bash -n "$$script"; done

## generate: run the go:generate directives: from pkg/apis, deep-copy functions and the CRD (manifests/base/crd)
## with controller-gen, and the typed clientset with its fake, informers and listers (pkg/generated) with
## k8s.io/code-generator (hack/update-codegen.sh), each generator from its own module under hack/tools; the
## feature-gate table; OPA's capabilities. test/crd fails when the generated API files are out of date.
generate:
	$(GO) generate ./...

# Images (docs/images.md). REGISTRY names them; an empty VERSION means `git describe --tags --always
# --dirty` (v0.0.0-dev outside git); SOURCE_DATE_EPOCH is every timestamp in them when git cannot
# give the commit time.
REGISTRY ?= ghcr.io/nodeguard
VERSION ?=
SOURCE_DATE_EPOCH ?= 0
IMAGES_DIR ?= _output/images
# More flags for `make images` and `make push` (`go run ./hack/images build --help`, `... push --help`).
IMAGES_ARGS ?=
PUSH_ARGS ?=

## images: build the webhook, agent and rollout-controller images (static binaries from scratch, linux/amd64 and
## linux/arm64, reproducible) into IMAGES_DIR: <program>.oci.tar (an OCI layout for docker/podman load, ctr import,
## kind load image-archive), digests.txt and kustomization.yaml (a kustomize Component pinning them by digest).
images:
	$(GO) run ./hack/images build --go='$(GO)' --registry='$(REGISTRY)' --version='$(VERSION)' \
		--source-date-epoch='$(SOURCE_DATE_EPOCH)' --output='$(IMAGES_DIR)' $(IMAGES_ARGS)

## push: push what `make images` built to REGISTRY (the one it was built for), tagged with its version, with docker's
## credentials; PUSH_ARGS=--insecure for a plain-HTTP registry.
push:
	$(GO) run ./hack/images push --registry='$(REGISTRY)' --version='$(VERSION)' --output='$(IMAGES_DIR)' $(PUSH_ARGS)

## clean: remove build output. The etcd/kube-apiserver cache (~/.cache/nodeguard) stays.
clean:
	rm -rf bin/ _output/

## help: list the targets.
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)
