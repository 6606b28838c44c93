# A kubelet configuration may not set fields that open the node up, unless
# its ConfigMap carries the annotation nodeguard.dev/allow-dangerous-fields:
# "true" (then each such field is still reported as a warning). Fields that
# are risky but have legitimate uses are only warned about.
#
# Denied, because each hands the node to someone who should not have it:
#   authentication.anonymous.enabled: true   requests without credentials
#       reach the kubelet API (CIS Kubernetes Benchmark 4.2.1).
#   authorization.mode: AlwaysAllow          any caller that reaches the
#       kubelet may exec into every pod on the node (CIS 4.2.2).
#   readOnlyPort other than 0                pod specs and metrics served
#       without authentication over plain HTTP (CIS 4.2.4).
#   staticPodURL                             the kubelet runs whatever pods
#       that URL serves, privileged ones included, outside admission.
#
# Warned:
#   failSwapOn: false                        the kubelet runs with swap on;
#       memory limits and eviction behave differently.
#   tlsMinVersion TLS 1.0 or 1.1             deprecated protocols (RFC 8996).
#   allowedUnsafeSysctls                     pods may set sysctls that are not
#       isolated per pod and reach the node.
#   staticPodPath changed                    changes which pods the kubelet
#       runs outside admission.
#
# Judged on input.nodeguard.kubeletConfig, the decoded configuration of an
# eligible ConfigMap being created or updated.
package nodeguard.admission

import data.nodeguard.lib

dangerous_fields_annotation := "nodeguard.dev/allow-dangerous-fields"

dangerous_fields_config := cfg if {
	lib.configmap_write
	lib.object_eligible
	cfg := input.nodeguard.kubeletConfig
	is_object(cfg)
}

dangerous_fields_allowed if lib.object_annotation(dangerous_fields_annotation) == "true"

dangerous_fields_name := sprintf("%s/%s", [input.request.namespace, lib.object_name])

# dangerous_fields_found[field] says why setting field is dangerous.
dangerous_fields_found["authentication.anonymous.enabled"] := "requests without credentials would reach the kubelet API" if {
	dangerous_fields_config.authentication.anonymous.enabled == true
}

dangerous_fields_found["authorization.mode"] := "AlwaysAllow lets any caller that reaches the kubelet exec into every pod on the node" if {
	dangerous_fields_config.authorization.mode == "AlwaysAllow"
}

dangerous_fields_found["readOnlyPort"] := "the read-only port serves pod specs and metrics without authentication" if {
	port := dangerous_fields_config.readOnlyPort
	port != 0
}

dangerous_fields_found["staticPodURL"] := "the kubelet would run whatever pods that URL serves, outside admission control" if {
	dangerous_fields_config.staticPodURL != ""
}

# dangerous_fields_risky[field] says why setting field deserves a warning.
dangerous_fields_risky["failSwapOn"] := "the kubelet would run with swap on, which changes how memory limits and eviction behave" if {
	dangerous_fields_config.failSwapOn == false
}

dangerous_fields_risky["tlsMinVersion"] := "TLS 1.0 and 1.1 are deprecated (RFC 8996)" if {
	dangerous_fields_config.tlsMinVersion in {"VersionTLS10", "VersionTLS11"}
}

dangerous_fields_risky["allowedUnsafeSysctls"] := "pods could set sysctls that are not isolated per pod" if {
	count(dangerous_fields_config.allowedUnsafeSysctls) > 0
}

dangerous_fields_risky["staticPodPath"] := "a different static pod directory changes which pods the kubelet runs outside admission control" if {
	old := input.nodeguard.oldKubeletConfig
	is_object(old)
	object.get(dangerous_fields_config, "staticPodPath", "") != object.get(old, "staticPodPath", "")
}

# The first line of each rule lets OPA's rule index skip it for reviews of
# other resources.
deny contains {"rule": "dangerous_fields", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	not dangerous_fields_allowed
	some field, why in dangerous_fields_found
	msg := sprintf(
		"kubelet configuration %s sets %s: %s; annotate the ConfigMap %s: \"true\" to allow it",
		[dangerous_fields_name, field, why, dangerous_fields_annotation],
	)
}

warn contains {"rule": "dangerous_fields", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	dangerous_fields_allowed
	some field, why in dangerous_fields_found
	msg := sprintf(
		"kubelet configuration %s sets %s, allowed by annotation %s: %s",
		[dangerous_fields_name, field, dangerous_fields_annotation, why],
	)
}

warn contains {"rule": "dangerous_fields", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	some field, why in dangerous_fields_risky
	msg := sprintf("kubelet configuration %s sets %s: %s", [dangerous_fields_name, field, why])
}
