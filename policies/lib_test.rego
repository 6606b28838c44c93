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
