package nodeguard.dangerous_fields_test

import data.nodeguard.testlib

allow_annotation := {"nodeguard.dev/allow-dangerous-fields": "true"}

review(config, annotations) := testlib.configmap_review("UPDATE", "kube-system", "kubelet-gpu", testlib.eligible, annotations, config, null)

denials(config, annotations) := found if {
	found := testlib.admission_denials("dangerous_fields") with input as review(config, annotations)
}

warnings(config, annotations) := found if {
	found := testlib.admission_warnings("dangerous_fields") with input as review(config, annotations)
}

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

with_field(path, value) := json.patch(plain, [{"op": "add", "path": path, "value": value}])

# denied_for(field, config) is true when config is refused for field alone,
# the message naming the field and the annotation value that allows it, and
# that annotation turns the refusal into a warning.
denied_for(field, config) if {
	found := denials(config, {})
	count(found) == 1
	some m in found
	contains(m.msg, sprintf("kube-system/kubelet-gpu sets %s", [field]))
	contains(m.msg, sprintf("nodeguard.dev/allow-dangerous-fields: \"%s\"", [field]))
	count(denials(config, {"nodeguard.dev/allow-dangerous-fields": field})) == 0
	some w in warnings(config, {"nodeguard.dev/allow-dangerous-fields": field})
	contains(w.msg, "allowed by annotation")
}

# cites(config, recommendation) is true when the refusal names the CIS
# recommendation.
cites(config, recommendation) if {
	some m in denials(config, {})
	contains(m.msg, sprintf("(CIS Kubernetes Benchmark %s)", [recommendation]))
}

test_plain_config_is_allowed_without_warnings if {
	count(denials(plain, {})) == 0
	count(warnings(plain, {})) == 0
}

test_anonymous_authentication_is_denied if {
	config := with_field("/authentication/anonymous/enabled", true)
	denied_for("authentication.anonymous.enabled", config)
	cites(config, "4.2.1")
	count(denials(with_field("/authentication/anonymous/enabled", false), {})) == 0
}

test_always_allow_authorization_is_denied if {
	config := with_field("/authorization/mode", "AlwaysAllow")
	denied_for("authorization.mode", config)
	cites(config, "4.2.2")
	count(denials(with_field("/authorization/mode", "Webhook"), {})) == 0
}

test_client_ca_file_is_denied if {
	config := with_field("/authentication/x509/clientCAFile", "/var/lib/other/ca.crt")
	denied_for("authentication.x509.clientCAFile", config)
	cites(config, "4.2.3")
}

test_webhook_authentication_off_is_denied if {
	config := with_field("/authentication/webhook/enabled", false)
	denied_for("authentication.webhook.enabled", config)
	count(denials(with_field("/authentication/webhook/enabled", true), {})) == 0
}

test_read_only_port_is_denied if {
	config := with_field("/readOnlyPort", 10255)
	denied_for("readOnlyPort", config)
	cites(config, "4.2.4")
	count(denials(with_field("/readOnlyPort", 0), {})) == 0
}

test_iptables_util_chains_off_is_denied if {
	config := with_field("/makeIPTablesUtilChains", false)
	denied_for("makeIPTablesUtilChains", config)
	cites(config, "4.2.6")
	count(denials(with_field("/makeIPTablesUtilChains", true), {})) == 0
}

test_server_certificate_rotation_off_is_denied if {
	config := with_field("/featureGates", {"RotateKubeletServerCertificate": false})
	denied_for("featureGates.RotateKubeletServerCertificate", config)
	cites(config, "4.2.11")
	count(denials(with_field("/featureGates", {"RotateKubeletServerCertificate": true}), {})) == 0
}

test_weak_cipher_suites_are_denied if {
	config := with_field("/tlsCipherSuites", ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_RC4_128_SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA"])
	denied_for("tlsCipherSuites", config)
	cites(config, "4.2.12")
	some m in denials(config, {})
	contains(m.msg, "TLS_RSA_WITH_3DES_EDE_CBC_SHA, TLS_RSA_WITH_RC4_128_SHA")
	not contains(m.msg, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,")
	count(denials(with_field("/tlsCipherSuites", ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"]), {})) == 0
}

test_old_tls_is_denied if {
	denied_for("tlsMinVersion", with_field("/tlsMinVersion", "VersionTLS11"))
	denied_for("tlsMinVersion", with_field("/tlsMinVersion", "VersionTLS10"))
	count(denials(with_field("/tlsMinVersion", "VersionTLS12"), {})) == 0
	count(denials(with_field("/tlsMinVersion", "VersionTLS13"), {})) == 0
}

test_unlimited_pod_pids_are_denied if {
	config := with_field("/podPidsLimit", -1)
	denied_for("podPidsLimit", config)
	cites(config, "4.2.13")
	denied_for("podPidsLimit", with_field("/podPidsLimit", 0))
	count(denials(with_field("/podPidsLimit", 4096), {})) == 0
}

test_unknown_runtime_endpoint_is_denied if {
	denied_for("containerRuntimeEndpoint", with_field("/containerRuntimeEndpoint", "unix:///tmp/evil.sock"))
	count(denials(with_field("/containerRuntimeEndpoint", "unix:///run/containerd/containerd.sock"), {})) == 0
}

test_runtime_endpoints_are_configurable if {
	config := with_field("/containerRuntimeEndpoint", "unix:///run/k3s/containerd/containerd.sock")
	count(denials(config, {})) == 1
	count(denials(config, {})) == 0 with data.nodeguard.config.container_runtime_endpoints as ["unix:///run/k3s/containerd/containerd.sock"]
}

test_unknown_image_endpoint_is_denied if {
	denied_for("imageServiceEndpoint", with_field("/imageServiceEndpoint", "unix:///tmp/images.sock"))
	count(denials(with_field("/imageServiceEndpoint", "unix:///run/crio/crio.sock"), {})) == 0
}

test_debugging_handlers_are_denied if {
	denied_for("enableDebuggingHandlers", with_field("/enableDebuggingHandlers", true))
	count(denials(with_field("/enableDebuggingHandlers", false), {})) == 0
}

test_profiling_handler_is_denied if {
	denied_for("enableProfilingHandler", with_field("/enableProfilingHandler", true))
	count(denials(with_field("/enableProfilingHandler", false), {})) == 0
}

test_contention_profiling_is_denied if {
	denied_for("enableContentionProfiling", with_field("/enableContentionProfiling", true))
}

test_wildcard_unsafe_sysctls_are_denied if {
	config := with_field("/allowedUnsafeSysctls", ["net.core.somaxconn", "net.*"])
	denied_for("allowedUnsafeSysctls", config)
	count(warnings(config, {})) == 0
}

test_named_unsafe_sysctls_are_warned if {
	config := with_field("/allowedUnsafeSysctls", ["net.core.somaxconn"])
	count(denials(config, {})) == 0
	count(warnings(config, {})) == 1
	count(warnings(with_field("/allowedUnsafeSysctls", []), {})) == 0
}

test_static_pod_path_is_denied if {
	denied_for("staticPodPath", with_field("/staticPodPath", "/var/lib/pods"))
}

test_changed_static_pod_path_is_denied_and_unchanged_is_not if {
	config := with_field("/staticPodPath", "/var/lib/pods")
	old := with_field("/staticPodPath", "/etc/kubernetes/manifests")
	changed := testlib.configmap_review("UPDATE", "kube-system", "kubelet-gpu", testlib.eligible, {}, config, old)
	count(testlib.admission_denials("dangerous_fields")) == 1 with input as changed
	same := testlib.configmap_review("UPDATE", "kube-system", "kubelet-gpu", testlib.eligible, {}, old, old)
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as same
}

test_static_pod_url_is_denied if {
	denied_for("staticPodURL", with_field("/staticPodURL", "http://198.51.100.7/pods"))
}

test_every_dangerous_field_is_reported if {
	config := json.patch(plain, [
		{"op": "add", "path": "/authentication/anonymous/enabled", "value": true},
		{"op": "add", "path": "/readOnlyPort", "value": 10255},
	])
	count(denials(config, {})) == 2
}

test_annotation_true_allows_every_field if {
	config := json.patch(plain, [
		{"op": "add", "path": "/authentication/anonymous/enabled", "value": true},
		{"op": "add", "path": "/tlsMinVersion", "value": "VersionTLS10"},
	])
	count(denials(config, allow_annotation)) == 0
	count(warnings(config, allow_annotation)) == 2
}

test_annotation_allows_only_the_fields_it_names if {
	config := json.patch(plain, [
		{"op": "add", "path": "/authentication/anonymous/enabled", "value": true},
		{"op": "add", "path": "/tlsMinVersion", "value": "VersionTLS10"},
		{"op": "add", "path": "/readOnlyPort", "value": 10255},
	])
	annotation := {"nodeguard.dev/allow-dangerous-fields": "tlsMinVersion, readOnlyPort"}
	found := denials(config, annotation)
	count(found) == 1
	some m in found
	contains(m.msg, "authentication.anonymous.enabled")
	count(warnings(config, annotation)) == 2
}

test_annotation_must_name_a_field_or_say_true if {
	config := with_field("/authentication/anonymous/enabled", true)
	count(denials(config, {"nodeguard.dev/allow-dangerous-fields": "yes"})) == 1
	count(denials(config, {"nodeguard.dev/allow-dangerous-fields": ""})) == 1
}

test_swap_is_warned_not_denied if {
	config := with_field("/failSwapOn", false)
	count(denials(config, {})) == 0
	some m in warnings(config, {})
	contains(m.msg, "failSwapOn")
	count(warnings(with_field("/failSwapOn", true), {})) == 0
}

test_unlimited_events_are_warned if {
	config := with_field("/eventRecordQPS", 0)
	count(denials(config, {})) == 0
	some m in warnings(config, {})
	contains(m.msg, "CIS 4.2.8")
	count(warnings(with_field("/eventRecordQPS", 50), {})) == 0
}

test_ineligible_configmaps_are_not_judged if {
	review_input := testlib.configmap_review("CREATE", "kube-system", "app", {}, {}, with_field("/readOnlyPort", 10255), null)
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review_input
}

test_missing_config_is_not_judged if {
	count(denials(null, {})) == 0
}

test_delete_is_not_judged if {
	review_input := testlib.configmap_review("DELETE", "kube-system", "kubelet-gpu", testlib.eligible, {}, with_field("/readOnlyPort", 10255), null)
	count(testlib.admission_denials("dangerous_fields")) == 0 with input as review_input
}
