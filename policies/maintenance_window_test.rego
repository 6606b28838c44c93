package nodeguard.maintenance_window_test

import data.nodeguard.testlib

node_user := "system:node:node-1"

node_groups := ["system:nodes", "system:authenticated"]

read_assigned := {"namespace": "kube-system", "verb": "get", "version": "v1", "resource": "configmaps", "name": "kubelet-gpu"}

# The graph as nodeguard.node would answer it: node-1 is in maintenance and
# assigned kube-system/kubelet-gpu; node-2 is not in maintenance.
mock_node("node-1") := {
	"name": "node-1",
	"labels": {"nodeguard.dev/maintenance": "true"},
	"kubeletVersion": "v1.37.2",
	"assignment": "kube-system/kubelet-gpu",
}

mock_node("node-2") := {
	"name": "node-2",
	"labels": {"nodeguard.dev/maintenance": "false"},
	"kubeletVersion": "v1.37.2",
	"assignment": "kube-system/kubelet-gpu",
}

# node_labels is what the webhook puts in input.nodeguard.nodeLabels: the
# labels the graph has for the requesting node.
node_labels(user) := labels if {
	labels := mock_node(trim_prefix(user, "system:node:")).labels
} else := {}

denials(user, groups, attributes) := found if {
	review := object.union(testlib.sar(user, groups, attributes), {"nodeguard": {"nodeLabels": node_labels(user)}})
	found := testlib.authz_denials("maintenance_window") with input as review
		with nodeguard.node as mock_node
}

test_reading_the_assigned_config_in_maintenance_is_denied if {
	some m in denials(node_user, node_groups, read_assigned)
	contains(m.msg, "node node-1")
	contains(m.msg, "kube-system/kubelet-gpu")
}

test_list_and_watch_by_name_are_denied if {
	count(denials(node_user, node_groups, object.union(read_assigned, {"verb": "list"}))) == 1
	count(denials(node_user, node_groups, object.union(read_assigned, {"verb": "watch"}))) == 1
}

test_node_out_of_maintenance_may_read if {
	count(denials("system:node:node-2", node_groups, read_assigned)) == 0
}

test_unknown_node_is_not_judged if {
	count(denials("system:node:node-3", node_groups, read_assigned)) == 0
}

test_other_configmaps_stay_readable if {
	count(denials(node_user, node_groups, object.union(read_assigned, {"name": "kube-root-ca.crt"}))) == 0
	count(denials(node_user, node_groups, object.union(read_assigned, {"namespace": "default"}))) == 0
}

test_writes_and_other_resources_are_not_judged if {
	count(denials(node_user, node_groups, object.union(read_assigned, {"verb": "update"}))) == 0
	count(denials(node_user, node_groups, object.union(read_assigned, {"resource": "secrets"}))) == 0
	count(denials(node_user, node_groups, object.union(read_assigned, {"group": "example.com"}))) == 0
}

test_users_that_are_not_nodes_are_not_judged if {
	count(denials("system:node:node-1", ["system:authenticated"], read_assigned)) == 0
	count(denials("admin", ["system:masters"], read_assigned)) == 0
}

test_non_resource_requests_are_not_judged if {
	review_input := {
		"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}, "user": node_user, "groups": node_groups},
		"nodeguard": {"node": "node-1", "kubeletVersion": "v1.37.2"},
	}
	count(testlib.authz_denials("maintenance_window")) == 0 with input as review_input with nodeguard.node as mock_node
}
