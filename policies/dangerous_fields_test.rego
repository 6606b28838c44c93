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
	"maxPods": 110,
}

with_field(path, value) := json.patch(plain, [{"op": "add", "path": path, "value": value}])

test_plain_config_is_allowed_without_warnings if {
	count(denials(plain, {})) == 0
	count(warnings(plain, {})) == 0
}

test_anonymous_authentication_is_denied if {
	some m in denials(with_field("/authentication/anonymous/enabled", true), {})
	contains(m.msg, "kube-system/kubelet-gpu sets authentication.anonymous.enabled")
	contains(m.msg, "nodeguard.dev/allow-dangerous-fields")
	count(denials(with_field("/authentication/anonymous/enabled", false), {})) == 0
}

test_always_allow_authorization_is_denied if {
	some m in denials(with_field("/authorization/mode", "AlwaysAllow"), {})
	contains(m.msg, "authorization.mode")
	count(denials(with_field("/authorization/mode", "Webhook"), {})) == 0
}

test_read_only_port_is_denied if {
	some m in denials(with_field("/readOnlyPort", 10255), {})
	contains(m.msg, "readOnlyPort")
	count(denials(with_field("/readOnlyPort", 0), {})) == 0
}

test_static_pod_url_is_denied if {
	some m in denials(with_field("/staticPodURL", "http://198.51.100.7/pods"), {})
	contains(m.msg, "staticPodURL")
}

test_every_dangerous_field_is_reported if {
	config := json.patch(plain, [
		{"op": "add", "path": "/authentication/anonymous/enabled", "value": true},
		{"op": "add", "path": "/readOnlyPort", "value": 10255},
	])
	count(denials(config, {})) == 2
}

test_annotation_turns_denials_into_warnings if {
	config := with_field("/authentication/anonymous/enabled", true)
	count(denials(config, allow_annotation)) == 0
	some m in warnings(config, allow_annotation)
	contains(m.msg, "allowed by annotation")
}

test_annotation_must_say_true if {
	config := with_field("/authentication/anonymous/enabled", true)
	count(denials(config, {"nodeguard.dev/allow-dangerous-fields": "yes"})) == 1
}

test_swap_is_warned_not_denied if {
	config := with_field("/failSwapOn", false)
	count(denials(config, {})) == 0
	some m in warnings(config, {})
	contains(m.msg, "failSwapOn")
	count(warnings(with_field("/failSwapOn", true), {})) == 0
}

test_old_tls_is_warned if {
	count(warnings(with_field("/tlsMinVersion", "VersionTLS11"), {})) == 1
	count(warnings(with_field("/tlsMinVersion", "VersionTLS12"), {})) == 0
}

test_unsafe_sysctls_are_warned if {
	count(warnings(with_field("/allowedUnsafeSysctls", ["net.core.somaxconn"]), {})) == 1
	count(warnings(with_field("/allowedUnsafeSysctls", []), {})) == 0
}

test_changed_static_pod_path_is_warned if {
	config := with_field("/staticPodPath", "/var/lib/pods")
	old := with_field("/staticPodPath", "/etc/kubernetes/manifests")
	review_input := testlib.configmap_review("UPDATE", "kube-system", "kubelet-gpu", testlib.eligible, {}, config, old)
	count(testlib.admission_warnings("dangerous_fields")) == 1 with input as review_input
	same := testlib.configmap_review("UPDATE", "kube-system", "kubelet-gpu", testlib.eligible, {}, old, old)
	count(testlib.admission_warnings("dangerous_fields")) == 0 with input as same
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
