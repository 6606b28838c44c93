# Kubelet configurations (eligible ConfigMaps) may live only in allowed
# namespaces, and a Node may be assigned only a configuration from one.
# Whoever can write ConfigMaps in a namespace can otherwise reconfigure
# every kubelet assigned from it, so keep the list to namespaces only
# cluster administrators write to.
#
# Configure with data.nodeguard.config.allowed_namespaces (an array or set),
# for instance with a module next to this one:
#
#	package nodeguard.config
#
#	allowed_namespaces := {"kubelet-configs", "infra"}
package nodeguard.admission

import data.nodeguard.lib

# A namespace of its own by default: the admission webhook exempts
# kube-system and nodeguard's namespace, so configurations kept there would
# escape the content checks (rule 6) and every policy.
default config_namespaces_allowed := {"kubelet-configs"}

config_namespaces_allowed := {ns | some ns in configured} if {
	configured := data.nodeguard.config.allowed_namespaces
}

config_namespaces_list := concat(", ", sort(config_namespaces_allowed))

# The first line of each rule compares input directly, so OPA's rule index
# skips the rule for reviews of other resources without evaluating it.
deny contains {"rule": "config_namespaces", "msg": msg} if {
	input.request.resource.resource == "configmaps"
	lib.configmap_write
	lib.object_eligible
	not input.request.namespace in config_namespaces_allowed
	msg := sprintf(
		"kubelet configuration %s/%s may not live in namespace %s; kubelet configurations are allowed only in: %s",
		[input.request.namespace, lib.object_name, input.request.namespace, config_namespaces_list],
	)
}

deny contains {"rule": "config_namespaces", "msg": msg} if {
	input.request.resource.resource == "nodes"
	lib.node_write
	lib.assignment_changed
	source := lib.config_source
	ref := lib.parse_config_source(source)
	not ref.namespace in config_namespaces_allowed
	msg := sprintf(
		"Node %s may not be assigned kubelet configuration %s: kubelet configurations are allowed only in: %s",
		[lib.object_name, source, config_namespaces_list],
	)
}
