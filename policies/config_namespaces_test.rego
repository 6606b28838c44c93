package nodeguard.config_namespaces_test

import data.nodeguard.testlib

source_annotation := "nodeguard.dev/config-source"

test_eligible_configmap_in_allowed_namespace_is_allowed if {
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.configmap_review("CREATE", "kubelet-configs", "kubelet-gpu", testlib.eligible, {}, {}, null)
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.configmap_review("UPDATE", "kubelet-configs", "kubelet-gpu", testlib.eligible, {}, {}, null)
}

test_eligible_configmap_elsewhere_is_denied if {
	some m in testlib.admission_denials("config_namespaces") with input as testlib.configmap_review("CREATE", "default", "kubelet-gpu", testlib.eligible, {}, {}, null)
	contains(m.msg, "default/kubelet-gpu")
	contains(m.msg, "kubelet-configs")
}

test_update_of_eligible_configmap_elsewhere_is_denied if {
	count(testlib.admission_denials("config_namespaces")) == 1 with input as testlib.configmap_review("UPDATE", "team-a", "kubelet-gpu", testlib.eligible, {}, {}, null)
}

test_ineligible_configmap_elsewhere_is_allowed if {
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.configmap_review("CREATE", "default", "app-config", {}, {}, null, null)
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.configmap_review("CREATE", "default", "app-config", {"nodeguard.dev/kubelet-config": "false"}, {}, null, null)
}

test_delete_elsewhere_is_not_judged if {
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.configmap_review("DELETE", "default", "kubelet-gpu", testlib.eligible, {}, null, null)
}

test_configured_namespaces_replace_the_default if {
	count(testlib.admission_denials("config_namespaces")) == 1 with input as testlib.configmap_review("CREATE", "kube-system", "kubelet-gpu", testlib.eligible, {}, {}, null)
		with data.nodeguard.config.allowed_namespaces as ["infra"]
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.configmap_review("CREATE", "infra", "kubelet-gpu", testlib.eligible, {}, {}, null)
		with data.nodeguard.config.allowed_namespaces as ["infra"]
}

test_empty_configured_namespaces_allow_none if {
	count(testlib.admission_denials("config_namespaces")) == 1 with input as testlib.configmap_review("CREATE", "kube-system", "kubelet-gpu", testlib.eligible, {}, {}, null)
		with data.nodeguard.config.allowed_namespaces as []
}

test_assignment_from_elsewhere_is_denied if {
	some m in testlib.admission_denials("config_namespaces") with input as testlib.node_review("UPDATE", "node-1", {}, {source_annotation: "default/kubelet-gpu"}, {})
	contains(m.msg, "Node node-1")
	contains(m.msg, "default/kubelet-gpu")
}

test_assignment_on_create_from_elsewhere_is_denied if {
	count(testlib.admission_denials("config_namespaces")) == 1 with input as testlib.node_review("CREATE", "node-1", {}, {source_annotation: "default/kubelet-gpu"}, null)
}

test_assignment_from_allowed_namespace_is_allowed if {
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.node_review("UPDATE", "node-1", {}, {source_annotation: "kubelet-configs/kubelet-gpu"}, {})
}

test_unchanged_assignment_is_not_judged if {
	# A kubelet updating its Node must not be refused for an assignment
	# that predates the policy.
	old := {"annotations": {source_annotation: "default/kubelet-gpu"}}
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.node_review("UPDATE", "node-1", {}, {source_annotation: "default/kubelet-gpu"}, old)
}

test_clearing_an_assignment_is_allowed if {
	old := {"annotations": {source_annotation: "default/kubelet-gpu"}}
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.node_review("UPDATE", "node-1", {}, {}, old)
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.node_review("UPDATE", "node-1", {}, {source_annotation: ""}, old)
}

test_malformed_assignment_is_left_to_the_built_in_rules if {
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.node_review("UPDATE", "node-1", {}, {source_annotation: "kubelet-gpu"}, {})
}

# A legacy spec.configSource is an assignment like the annotation.
test_legacy_assignment_from_elsewhere_is_denied if {
	some m in testlib.admission_denials("config_namespaces") with input as testlib.legacy_node_review("UPDATE", "node-1", {}, "default", "kubelet-gpu", {})
	contains(m.msg, "default/kubelet-gpu")
	count(testlib.admission_denials("config_namespaces")) == 0 with input as testlib.legacy_node_review("UPDATE", "node-1", {}, "kubelet-configs", "kubelet-gpu", {})
}
