// Package kubeletconfig is the one place where nodeguard decodes and judges a
// KubeletConfiguration (kubelet.config.k8s.io/v1beta1) before a kubelet reads
// it: the admission webhook (the feature-gates and config-content rules of docs/reference.md), the node agent and
// the kubectl plugin all call it, so they refuse the same configurations with
// the same messages.
//
// # Decoding
//
// Decode, DecodeConfigMap and DecodeConfigMapKey decode strictly with the
// types of k8s.io/kubelet/config/v1beta1: unknown or duplicate fields, values
// of the wrong type, a missing or different apiVersion or kind, more than one
// YAML document, empty input and input over MaxConfigBytes (1 MiB) are
// errors. The kubelet itself is more lenient (it falls back to a non-strict
// decode and only warns); refusing early is the point.
//
// Nothing is defaulted: k8s.io/kubelet ships no defaulting functions (they
// live in k8s.io/kubernetes, which the product module must not import), and a
// configuration written back must stay as its author wrote it. A field left
// out stays at its zero value.
//
// # Validation
//
// Validate mirrors the kubelet's start-up checks
// (pkg/kubelet/apis/config/validation and the component constructors that
// reject configurations, in k8s.io/kubernetes v1.37) for the fields operators
// change most: ports and addresses, TLS settings, API and event rate limits,
// node status frequencies, image garbage collection and pulls, pod limits,
// container log rotation, taints, default sysctls, graceful shutdown, cgroup
// driver and node allocatable enforcement, system/kube reservations, the CPU,
// memory and topology managers, eviction thresholds, swap behaviour, logging,
// tracing and user namespaces. Every error is a field.Error whose path names
// the field, for example
//
//	evictionHard[memory.avilable]: Unsupported value: "memory.avilable": supported values: ...
//
// Where a rule relates a field that is set to one left unset, the unset one
// takes the kubelet's default: imageGCHighThresholdPercent (85) and
// imageGCLowThresholdPercent (80), imageMinimumGCAge (2m), cgroupsPerQOS
// (true), enforceNodeAllocatable (["pods"]), serializeImagePulls (false when
// maxParallelImagePulls > 1) and evictionHard[memory.available] (100Mi) for
// the static memory manager's reservation. No other default is assumed.
//
// A few checks are stricter than the kubelet, because the kubelet would
// accept the value and then misbehave: negative durations for status, GC,
// eviction and CPU manager periods, podPidsLimit below -1, a relative
// resolvConf path, and clusterDNS entries that are not IP addresses.
//
// Left to the kubelet, because they need the node (its capacity, its CPUs,
// its cgroup version, the kubelet binary's version) or rarely change:
// percentage eviction thresholds against capacity, reservedSystemCPUs against
// the CPUs present, failCgroupV1 and singleProcessOOMKill against the cgroup
// version, showHiddenMetricsForVersion, whether defaultPodSysctls and
// allowedUnsafeSysctls are namespaced, the syntax of
// preloadedImagesVerificationAllowlist, the options maps of the CPU and
// topology managers, and feature-gate dependencies.
//
// # Feature gates
//
// CheckFeatureGates judges featureGates, and the fields that need a gate,
// against a given kubelet version; LookupFeatureGate answers for one gate. The
// data is generated (featuregates_generated.go, by hack/tools/kube/cmd/featuregen
// from the k8s.io/kubernetes release pinned there) and covers the source
// release and the three before it; see FeatureGateCoverage for what happens
// outside that range. Regenerate with
//
//	go generate ./pkg/kubeletconfig
//
// or, from hack/tools/kube,
//
//	go run ./cmd/featuregen -o ../../../pkg/kubeletconfig/featuregates_generated.go
//
// TestFeatureGateTableIsCurrent fails when the committed file differs from
// what the generator writes.
//
// # Assignments
//
// JudgeAssignment is the feature-gates and config-content rules as they judge assigning one decoded
// configuration (a Candidate) to one node, given the kubelet version the
// node reports: refused or not, under which rule, whether the refusal
// concerns the node's own state, the message and the warnings. The
// webhook's Node rules and `kubectl nodeguard assign` both call it; a node
// that reports no parseable version is judged by CheckEveryKnownKubelet
// (KnownKubelets names that range in messages). How far a node's report is
// trusted for ConfigMaps it shares with other nodes stays the webhook's.
//
// # Changes
//
// Diff lists the top-level fields that differ between two configurations, so
// that admission can refuse a change to a field the settings (the
// NodeguardPolicy's forbiddenDynamicFields) do not allow to change
// dynamically.
//
// # Cost
//
// Strictly decoding YAML is most of what judging an eligible ConfigMap
// costs, which is why Checker remembers outcomes by content; the figures
// and their command are in docs/benchmarks.md.
package kubeletconfig
