# A kubelet configuration may not set fields that open the node up. An
# eligible ConfigMap reconfigures every kubelet it is assigned to, so the
# shipped policy holds it to the kubelet recommendations of the CIS
# Kubernetes Benchmark (section 4.2) and to more of the same kind: among
# them every field that makes the kubelet execute or load from a path
# (staticPodPath, volumePluginDir, whose FlexVolume drivers it runs as root,
# tlsCertFile, tlsPrivateKeyFile, resolvConf, podLogsDir), refused when
# they change.
#
# The rules themselves are Go (pkg/kubeletconfig/hardening), their one
# implementation: the node agent applies the same ones before it writes a
# configuration. The webhook runs them once per review and hands what they
# find to this policy as input.nodeguard.dangerousFields ({field: {cis,
# why}}) and input.nodeguard.riskyFields ({field: why}); the policy decides
# what is refused and what only warned about, and words it. Only the runtime
# socket rules are here, because their allow-list is deployment data
# (data.nodeguard.config.container_runtime_endpoints).
#
# Each finding is one named rule: the name is the field it judges. A
# ConfigMap may still set a refused field when it carries the annotation
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
package nodeguard.admission

import data.nodeguard.lib

dangerous_fields_annotation := "nodeguard.dev/allow-dangerous-fields"

dangerous_fields_config := cfg if {
	lib.configmap_write
	lib.object_eligible
	cfg := input.nodeguard.kubeletConfig
	is_object(cfg)
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
# which CIS recommendation it breaks ("" for none): what the Go rules found,
# and the runtime socket rules below.
dangerous_fields_found[field] := finding if {
	dangerous_fields_config
	some field, finding in input.nodeguard.dangerousFields
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

# dangerous_fields_risky[field] says why setting field deserves a warning.
dangerous_fields_risky[field] := why if {
	dangerous_fields_config
	some field, why in input.nodeguard.riskyFields
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
