# Input builders for the policy tests. The documents follow the input
# layout in README.md; only the fields the policies read are filled in.
package nodeguard.testlib

eligible := {"nodeguard.dev/kubelet-config": "true"}

# configmap_review is an admission input for a ConfigMap write.
configmap_review(operation, namespace, name, labels, annotations, config, old_config) := {
	"request": {
		"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
		"resource": {"group": "", "version": "v1", "resource": "configmaps"},
		"name": name,
		"namespace": namespace,
		"operation": operation,
		"userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
		"object": {
			"apiVersion": "v1",
			"kind": "ConfigMap",
			"metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
			"data": {"kubelet": "{}"},
		},
		"oldObject": null,
		"options": null,
	},
	"nodeguard": {"node": "", "kubeletVersion": "", "nodeLabels": {}, "kubeletConfig": config, "oldKubeletConfig": old_config},
}

# node_review is an admission input for a Node write; old is the old Node's
# metadata, or null for a CREATE.
node_review(operation, name, labels, annotations, old) := {
	"request": {
		"uid": "705ab4f5-6393-11e8-b7cc-42010a800003",
		"kind": {"group": "", "version": "v1", "kind": "Node"},
		"resource": {"group": "", "version": "v1", "resource": "nodes"},
		"name": name,
		"operation": operation,
		"userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
		"object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels, "annotations": annotations}},
		"oldObject": old_node(name, old),
		"options": null,
	},
	"nodeguard": {"node": "", "kubeletVersion": "", "nodeLabels": {}, "kubeletConfig": null, "oldKubeletConfig": null},
}

# legacy_node_review is node_review for a Node assigned through a legacy
# spec.configSource.configMap (namespace/name), without the annotation.
legacy_node_review(operation, name, labels, namespace, configmap, old) := json.patch(node_review(operation, name, labels, {}, old), [{
	"op": "add", "path": "/request/object/spec",
	"value": {"configSource": {"configMap": {"namespace": namespace, "name": configmap, "kubeletConfigKey": "kubelet"}}},
}])

old_node(_, null) := null

old_node(name, old) := {"apiVersion": "v1", "kind": "Node", "metadata": object.union({"name": name}, old)} if old != null

# sar is an authorization input for a request by user in groups.
sar(user, groups, attributes) := {
	"spec": {"resourceAttributes": attributes, "user": user, "groups": groups, "uid": "u-1"},
	"nodeguard": {"node": node_name(user, groups), "kubeletVersion": "v1.37.2", "nodeLabels": {}},
}

node_name(user, groups) := trim_prefix(user, "system:node:") if {
	"system:nodes" in groups
	startswith(user, "system:node:")
} else := ""

# admission_denials(rule) are the admission denials a rule produced.
admission_denials(rule) := {m | some m in data.nodeguard.admission.deny; m.rule == rule}

# admission_warnings(rule) are the admission warnings a rule produced.
admission_warnings(rule) := {m | some m in data.nodeguard.admission.warn; m.rule == rule}

# authz_denials(rule) are the authorization denials a rule produced.
authz_denials(rule) := {m | some m in data.nodeguard.authz.deny; m.rule == rule}
