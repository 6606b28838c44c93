# A kubelet configuration may not set fields that open the node up. An
# eligible ConfigMap reconfigures every kubelet it is assigned to, so the
# shipped policy holds it to the kubelet recommendations of the CIS
# Kubernetes Benchmark (section 4.2) and to a few more of the same kind.
#
# Each finding below is one named rule: the name is the field it judges.
# A ConfigMap may still set a refused field when it carries the annotation
# nodeguard.dev/allow-dangerous-fields, naming the field ("tlsCipherSuites",
# several separated by commas) or "true" for every field; each allowed
# field is then reported as a warning. Whoever may write the ConfigMap may
# set the annotation: RBAC on ConfigMaps in the allowed namespaces
# (config_namespaces.rego) is what entitles someone to it, which is why
# those namespaces must be ones the admission webhook judges.
#
# A ConfigMap is judged on what it sets. A field it leaves out keeps the
# node's own value (drop-in mode, and the agent's node-local fields) or the
# kubelet's default, so the rules refuse settings, they never require them.
# The decoded form cannot tell an unset non-pointer field from its zero
# value, so these are not judged, and the docs say so:
# streamingConnectionIdleTimeout 0 (CIS 4.2.5), rotateCertificates false
# (CIS 4.2.10), protectKernelDefaults false.
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

# dangerous_fields_old_config is the configuration before an update, {}
# when there is none (a create, or old content that does not decode).
default dangerous_fields_old_config := {}

dangerous_fields_old_config := old if {
	old := input.nodeguard.oldKubeletConfig
	is_object(old)
}

# dangerous_fields_allowance is what the annotation names: fields, or "true".
dangerous_fields_allowance := {name |
	some part in split(lib.object_annotation(dangerous_fields_annotation), ",")
	name := trim_space(part)
	name != ""
}

dangerous_fields_allowed(_) if "true" in dangerous_fields_allowance

dangerous_fields_allowed(field) if field in dangerous_fields_allowance

dangerous_fields_name := sprintf("%s/%s", [input.request.namespace, lib.object_name])

# dangerous_fields_found[field] says why setting field is refused, and
# which CIS recommendation it breaks ("" for none).

# CIS 4.2.1.
dangerous_fields_found["authentication.anonymous.enabled"] := {"cis": "4.2.1", "why": "requests without credentials would reach the kubelet API"} if {
	dangerous_fields_config.authentication.anonymous.enabled == true
}

# CIS 4.2.2.
dangerous_fields_found["authorization.mode"] := {"cis": "4.2.2", "why": "AlwaysAllow lets any caller that reaches the kubelet exec into every pod on the node"} if {
	dangerous_fields_config.authorization.mode == "AlwaysAllow"
}

# CIS 4.2.3: the client CA is the node's, provisioned with it. A shared
# configuration that names another file hands the kubelet's API to
# whoever holds that CA's keys.
dangerous_fields_found["authentication.x509.clientCAFile"] := {"cis": "4.2.3", "why": "it changes which CA's client certificates the kubelet accepts; the node's own CA file must stand"} if {
	dangerous_fields_config.authentication.x509.clientCAFile != ""
}

# Without webhook authentication the kubelet no longer asks the apiserver
# who a bearer token belongs to, and its API is left to the client CA file
# alone (the other half of CIS 4.2.3's "as appropriate").
dangerous_fields_found["authentication.webhook.enabled"] := {"cis": "4.2.3", "why": "the kubelet would stop checking bearer tokens with the apiserver, leaving its API to client certificates alone"} if {
	dangerous_fields_config.authentication.webhook.enabled == false
}

# CIS 4.2.4.
dangerous_fields_found["readOnlyPort"] := {"cis": "4.2.4", "why": "the read-only port serves pod specs and metrics without authentication"} if {
	port := dangerous_fields_config.readOnlyPort
	port != 0
}

# CIS 4.2.6.
dangerous_fields_found["makeIPTablesUtilChains"] := {"cis": "4.2.6", "why": "the kubelet would stop keeping the iptables chains the node's networking relies on"} if {
	dangerous_fields_config.makeIPTablesUtilChains == false
}

# CIS 4.2.11.
dangerous_fields_found["featureGates.RotateKubeletServerCertificate"] := {"cis": "4.2.11", "why": "the kubelet would keep serving with a certificate it never renews"} if {
	dangerous_fields_config.featureGates.RotateKubeletServerCertificate == false
}

# CIS 4.2.12: only ECDHE key exchange with AEAD ciphers (and the TLS 1.3
# suites), as the webhook itself serves. RC4, 3DES, CBC and static RSA
# key exchange are refused.
dangerous_fields_strong_ciphers := {
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_AES_128_GCM_SHA256",
	"TLS_AES_256_GCM_SHA384",
	"TLS_CHACHA20_POLY1305_SHA256",
}

dangerous_fields_found["tlsCipherSuites"] := {"cis": "4.2.12", "why": why} if {
	weak := {s | some s in dangerous_fields_config.tlsCipherSuites; not s in dangerous_fields_strong_ciphers}
	count(weak) > 0
	why := sprintf("weak cipher suites %s; only ECDHE with AES-GCM or ChaCha20-Poly1305 (and TLS 1.3 suites) are accepted", [concat(", ", sort(weak))])
}

# CIS 4.2.12, and RFC 8996: TLS 1.0 and 1.1 are deprecated.
dangerous_fields_found["tlsMinVersion"] := {"cis": "4.2.12", "why": "TLS 1.0 and 1.1 are deprecated (RFC 8996); the minimum must be TLS 1.2 or above"} if {
	dangerous_fields_config.tlsMinVersion in {"VersionTLS10", "VersionTLS11"}
}

# CIS 4.2.13: 0 and -1 both mean no limit.
dangerous_fields_found["podPidsLimit"] := {"cis": "4.2.13", "why": "pods would have no limit on process IDs, so one pod can exhaust the node's"} if {
	dangerous_fields_config.podPidsLimit <= 0
}

# The kubelet trusts its runtime with every container: a shared
# configuration may point it only at a well-known runtime socket, or one
# listed in data.nodeguard.config.container_runtime_endpoints.
default dangerous_fields_runtime_endpoints := {
	"unix:///run/containerd/containerd.sock",
	"unix:///var/run/containerd/containerd.sock",
	"unix:///run/crio/crio.sock",
	"unix:///var/run/crio/crio.sock",
}

dangerous_fields_runtime_endpoints := {e | some e in configured} if {
	configured := data.nodeguard.config.container_runtime_endpoints
}

dangerous_fields_found["containerRuntimeEndpoint"] := {"cis": "", "why": why} if {
	endpoint := dangerous_fields_config.containerRuntimeEndpoint
	endpoint != ""
	not endpoint in dangerous_fields_runtime_endpoints
	why := sprintf("the kubelet would hand every container to %q, which is not one of the known runtime sockets (%s)", [endpoint, concat(", ", sort(dangerous_fields_runtime_endpoints))])
}

dangerous_fields_found["imageServiceEndpoint"] := {"cis": "", "why": why} if {
	endpoint := dangerous_fields_config.imageServiceEndpoint
	endpoint != ""
	not endpoint in dangerous_fields_runtime_endpoints
	why := sprintf("the kubelet would pull images through %q, which is not one of the known runtime sockets (%s)", [endpoint, concat(", ", sort(dangerous_fields_runtime_endpoints))])
}

# Handlers the node may have turned off: in drop-in mode, and for the
# agent's node-local fields, a field the ConfigMap leaves out keeps the
# node's value, so setting one to true turns it on over the node's choice.
dangerous_fields_found["enableDebuggingHandlers"] := {"cis": "", "why": "it turns on exec, attach, port-forward and log endpoints the node may have turned off; leave it out to keep the node's own setting"} if {
	dangerous_fields_config.enableDebuggingHandlers == true
}

dangerous_fields_found["enableProfilingHandler"] := {"cis": "", "why": "it serves /debug/pprof, which reveals the kubelet's memory and goroutines; leave it out to keep the node's own setting"} if {
	dangerous_fields_config.enableProfilingHandler == true
}

dangerous_fields_found["enableContentionProfiling"] := {"cis": "", "why": "contention profiling slows the kubelet and exposes its lock profile through /debug/pprof"} if {
	dangerous_fields_config.enableContentionProfiling == true
}

# A wildcard lets pods set any sysctl under it, present and future ones;
# named sysctls are only warned about (below).
dangerous_fields_found["allowedUnsafeSysctls"] := {"cis": "", "why": why} if {
	wild := {s | some s in dangerous_fields_config.allowedUnsafeSysctls; endswith(s, "*")}
	count(wild) > 0
	why := sprintf("wildcards %s let pods set any sysctl under them, including ones that reach the node", [concat(", ", sort(wild))])
}

dangerous_fields_found["staticPodPath"] := {"cis": "", "why": "a static pod directory decides which pods the kubelet runs outside admission control"} if {
	object.get(dangerous_fields_config, "staticPodPath", "") != object.get(dangerous_fields_old_config, "staticPodPath", "")
}

dangerous_fields_found["staticPodURL"] := {"cis": "", "why": "the kubelet would run whatever pods that URL serves, outside admission control"} if {
	dangerous_fields_config.staticPodURL != ""
}

# dangerous_fields_risky[field] says why setting field deserves a warning.
dangerous_fields_risky["failSwapOn"] := "the kubelet would run with swap on, which changes how memory limits and eviction behave" if {
	dangerous_fields_config.failSwapOn == false
}

dangerous_fields_risky["allowedUnsafeSysctls"] := "pods could set sysctls that are not isolated per pod" if {
	count(dangerous_fields_config.allowedUnsafeSysctls) > 0
	not dangerous_fields_found.allowedUnsafeSysctls
}

dangerous_fields_risky["eventRecordQPS"] := "0 removes the limit on the events the kubelet creates (CIS 4.2.8)" if {
	dangerous_fields_config.eventRecordQPS == 0
}

dangerous_fields_reference(finding) := sprintf(" (CIS Kubernetes Benchmark %s)", [finding.cis]) if {
	finding.cis != ""
} else := ""

# The first line of each rule lets OPA's rule index skip it for reviews of
# other resources.
deny contains {"rule": "dangerous_fields", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	some field, finding in dangerous_fields_found
	not dangerous_fields_allowed(field)
	msg := sprintf(
		"kubelet configuration %s sets %s: %s%s; annotate the ConfigMap %s: %q (or \"true\" for every field) to allow it",
		[dangerous_fields_name, field, finding.why, dangerous_fields_reference(finding), dangerous_fields_annotation, field],
	)
}

warn contains {"rule": "dangerous_fields", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	some field, finding in dangerous_fields_found
	dangerous_fields_allowed(field)
	msg := sprintf(
		"kubelet configuration %s sets %s, allowed by annotation %s: %s%s",
		[dangerous_fields_name, field, dangerous_fields_annotation, finding.why, dangerous_fields_reference(finding)],
	)
}

warn contains {"rule": "dangerous_fields", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	some field, why in dangerous_fields_risky
	msg := sprintf("kubelet configuration %s sets %s: %s", [dangerous_fields_name, field, why])
}
