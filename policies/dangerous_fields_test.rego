package nodeguard.dangerous_fields_test

import data.nodeguard.testlib

# The rules that find dangerous fields are Go (pkg/kubeletconfig/hardening,
# tested there, and through this policy with inputs the webhook builds in
# dangerous_fields_shipped_test.go). These tests hand the policy what the
# rules found, and check what it makes of it: denials naming the field and
# the CIS recommendation, the allowance annotation, warnings, the runtime
# socket rules it keeps, and the writes it judges at all.

allow_annotation := {"nodeguard.dev/allow-dangerous-fields": "true"}

# What pkg/kubeletconfig decodes from a plain configuration, rendered as the
# engine renders it: durations are "0s", nested structs present.
plain := {
	"kind": "KubeletConfiguration",
	"apiVersion": "kubelet.config.k8s.io/v1beta1",
	"authentication": {"x509": {}, "webhook": {"cacheTTL": "0s"}, "anonymous": {}},
	"authorization": {"webhook": {"cacheAuthorizedTTL": "0s", "cacheUnauthorizedTTL": "0s"}},
	"streamingConnectionIdleTimeout": "0s",
	"containerRuntimeEndpoint": "",
	"maxPods": 110,
}

anonymous := {"authentication.anonymous.enabled": {"cis": "4.2.1", "why": "requests without credentials would reach the kubelet API"}}

volume_plugins := {"volumePluginDir": {"cis": "", "why": "the kubelet runs the FlexVolume drivers it finds there as root"}}

# review is the input for an update of eligible ConfigMap kube-system/kubelet-gpu
# whose configuration the rules found found and risky in.
review(config, found, risky, annotations) := json.patch(
	testlib.configmap_review("UPDATE", "kube-system", "kubelet-gpu", testlib.eligible, annotations, config, null),
	[
		{"op": "add", "path": "/nodeguard/dangerousFields", "value": found},
		{"op": "add", "path": "/nodeguard/riskyFields", "value": risky},
	],
)

denials(found, annotations) := result if {
	result := testlib.admission_denials("dangerous_fields") with input as review(plain, found, {}, annotations)
}

warnings(found, risky, annotations) := result if {
	result := testlib.admission_warnings("dangerous_fields") with input as review(plain, found, risky, annotations)
}

with_field(path, value) := json.patch(plain, [{"op": "add", "path": path, "value": value}])

test_nothing_found_is_allowed_without_warnings if {
	count(denials({}, {})) == 0
	count(warnings({}, {}, {})) == 0
}

test_a_finding_is_denied_naming_the_field_and_the_annotation if {
	found := denials(volume_plugins, {})
	count(found) == 1
	some m in found
	contains(m.msg, "kube-system/kubelet-gpu sets volumePluginDir: the kubelet runs the FlexVolume drivers it finds there as root")
	contains(m.msg, `nodeguard.dev/allow-dangerous-fields: "volumePluginDir"`)
	not contains(m.msg, "CIS")
}

test_a_finding_cites_its_cis_recommendation if {
	some m in denials(anonymous, {})
	contains(m.msg, "(CIS Kubernetes Benchmark 4.2.1)")
}

test_every_finding_is_reported if {
	count(denials(object.union(anonymous, volume_plugins), {})) == 2
}

test_annotation_true_allows_every_field if {
	found := object.union(anonymous, volume_plugins)
	count(denials(found, allow_annotation)) == 0
	count(warnings(found, {}, allow_annotation)) == 2
	some w in warnings(found, {}, allow_annotation)
	contains(w.msg, "allowed by annotation")
}

test_annotation_allows_only_the_fields_it_names if {
	found := object.union(anonymous, volume_plugins)
	annotation := {"nodeguard.dev/allow-dangerous-fields": "tlsMinVersion, volumePluginDir"}
	denied := denials(found, annotation)
	count(denied) == 1
	some m in denied
	contains(m.msg, "authentication.anonymous.enabled")
	count(warnings(found, {}, annotation)) == 1
}

test_annotation_must_name_a_field_or_say_true if {
	count(denials(anonymous, {"nodeguard.dev/allow-dangerous-fields": "yes"})) == 1
	count(denials(anonymous, {"nodeguard.dev/allow-dangerous-fields": ""})) == 1
}

test_risky_fields_are_warned_not_denied if {
	risky := {"failSwapOn": "the kubelet would run with swap on"}
	count(denials({}, {})) == 0
	some m in warnings({}, risky, {})
	contains(m.msg, "kube-system/kubelet-gpu sets failSwapOn: the kubelet would run with swap on")
}

test_unknown_runtime_endpoint_is_denied if {
	config := with_field("/containerRuntimeEndpoint", "unix:///tmp/evil.sock")
	some m in testlib.admission_denials("dangerous_fields") with input as review(config, {}, {}, {})
	contains(m.msg, "sets containerRuntimeEndpoint")
	known := with_field("/containerRuntimeEndpoint", "unix:///run/containerd/containerd.sock")
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review(known, {}, {}, {})
}

test_runtime_endpoints_are_configurable if {
	config := with_field("/containerRuntimeEndpoint", "unix:///run/k3s/containerd/containerd.sock")
	count(testlib.admission_denials("dangerous_fields")) == 1 with input as review(config, {}, {}, {})
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review(config, {}, {}, {})
		with data.nodeguard.config.container_runtime_endpoints as ["unix:///run/k3s/containerd/containerd.sock"]
}

test_unknown_image_endpoint_is_denied if {
	config := with_field("/imageServiceEndpoint", "unix:///tmp/images.sock")
	count(testlib.admission_denials("dangerous_fields")) == 1 with input as review(config, {}, {}, {})
	crio := with_field("/imageServiceEndpoint", "unix:///run/crio/crio.sock")
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review(crio, {}, {}, {})
}

test_ineligible_configmaps_are_not_judged if {
	review_input := json.patch(
		testlib.configmap_review("CREATE", "kube-system", "app", {}, {}, plain, null),
		[{"op": "add", "path": "/nodeguard/dangerousFields", "value": volume_plugins}],
	)
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review_input
}

test_missing_config_is_not_judged if {
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review(null, volume_plugins, {}, {})
}

test_delete_is_not_judged if {
	review_input := json.patch(
		testlib.configmap_review("DELETE", "kube-system", "kubelet-gpu", testlib.eligible, {}, plain, null),
		[{"op": "add", "path": "/nodeguard/dangerousFields", "value": volume_plugins}],
	)
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review_input
}
