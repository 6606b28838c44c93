package nodeguard.lib_test

import data.nodeguard.lib

test_parse_config_source if {
	lib.parse_config_source("kube-system/kubelet-gpu") == {"namespace": "kube-system", "name": "kubelet-gpu"}
	not lib.parse_config_source("kubelet-gpu")
	not lib.parse_config_source("a/b/c")
	not lib.parse_config_source("/kubelet-gpu")
	not lib.parse_config_source("kube-system/")
	not lib.parse_config_source("")
}

test_config_source_and_its_change if {
	node := {"metadata": {"annotations": {"nodeguard.dev/config-source": "a/b"}}}
	lib.config_source == "a/b" with input as {"request": {"object": node, "oldObject": null}}
	lib.assignment_changed with input as {"request": {"object": node, "oldObject": null}}
	not lib.assignment_changed with input as {"request": {"object": node, "oldObject": node}}
	lib.config_source == "" with input as {"request": {"object": {"metadata": {}}, "oldObject": node}}
	lib.assignment_changed with input as {"request": {"object": {"metadata": {}}, "oldObject": node}}
}

test_annotations_default_to_empty if {
	review := {"request": {"object": {"metadata": {"annotations": {"b": "2"}}}, "oldObject": null}}
	lib.object_annotation("b") == "2" with input as review
	lib.object_annotation("x") == "" with input as review
	lib.old_config_source == "" with input as review
}

test_object_eligible if {
	lib.object_eligible with input as {"request": {"object": {"metadata": {"labels": {"nodeguard.dev/kubelet-config": "true"}}}}}
	not lib.object_eligible with input as {"request": {"object": {"metadata": {"labels": {"nodeguard.dev/kubelet-config": "yes"}}}}}
	not lib.object_eligible with input as {"request": {"object": {"metadata": {}}}}
	not lib.object_eligible with input as {"request": {"object": null}}
}

test_object_name_falls_back_to_the_request if {
	lib.object_name == "from-object" with input as {"request": {"name": "from-request", "object": {"metadata": {"name": "from-object"}}}}
	lib.object_name == "from-request" with input as {"request": {"name": "from-request", "object": {"metadata": {"generateName": "x-"}}}}
}

test_writes if {
	lib.configmap_write with input as {"request": {"resource": {"group": "", "resource": "configmaps"}, "operation": "UPDATE"}}
	not lib.configmap_write with input as {"request": {"resource": {"group": "", "resource": "configmaps"}, "operation": "DELETE"}}
	lib.node_write with input as {"request": {"resource": {"group": "", "resource": "nodes"}, "operation": "CREATE"}}
	not lib.node_write with input as {"request": {"resource": {"group": "example.com", "resource": "nodes"}, "operation": "CREATE"}}
}

legacy_node(namespace, name) := {"metadata": {}, "spec": {"configSource": {"configMap": {"namespace": namespace, "name": name, "kubeletConfigKey": "kubelet"}}}}

test_legacy_config_source_reads_as_the_annotation if {
	legacy := legacy_node("a", "b")
	annotated := {"metadata": {"annotations": {"nodeguard.dev/config-source": "a/b"}}}
	lib.config_source == "a/b" with input as {"request": {"object": legacy, "oldObject": null}}
	lib.old_config_source == "a/b" with input as {"request": {"object": {"metadata": {}}, "oldObject": legacy}}
	lib.assignment_changed with input as {"request": {"object": legacy, "oldObject": null}}

	# The same assignment in either form is no change.
	not lib.assignment_changed with input as {"request": {"object": annotated, "oldObject": legacy}}
	not lib.assignment_changed with input as {"request": {"object": legacy, "oldObject": annotated}}
}

test_the_annotation_wins_over_a_legacy_config_source if {
	both := object.union(legacy_node("a", "b"), {"metadata": {"annotations": {"nodeguard.dev/config-source": "c/d"}}})
	lib.config_source == "c/d" with input as {"request": {"object": both, "oldObject": null}}
	cleared := object.union(legacy_node("a", "b"), {"metadata": {"annotations": {"nodeguard.dev/config-source": ""}}})
	lib.config_source == "" with input as {"request": {"object": cleared, "oldObject": null}}
}

test_an_incomplete_legacy_config_source_assigns_nothing if {
	lib.config_source == "" with input as {"request": {"object": legacy_node("", "b"), "oldObject": null}}
	lib.config_source == "" with input as {"request": {"object": legacy_node("a", ""), "oldObject": null}}
}
