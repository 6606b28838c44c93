# While a Node carries the label nodeguard.dev/maintenance: "true", it may
# not read its assigned kubelet configuration, so no new configuration is
# rolled out to it during the window: the node agent keeps running from its
# checkpoint, and picks the assignment up once the label is removed. Reads
# of other ConfigMaps (those its pods use) are left alone, so the node's
# workloads keep working.
#
# To freeze every ConfigMap read of the node instead, drop the line that
# compares the assignment.
#
# Reads the node's labels from input.nodeguard.nodeLabels and its
# assignment from nodeguard.node, both from the graph: the label takes
# effect as soon as the webhook has seen the Node change.
package nodeguard.authz

maintenance_window_label := "nodeguard.dev/maintenance"

deny contains {"rule": "maintenance_window", "msg": msg} if {
	# Compared directly on input, so that OPA's rule index skips the rule
	# for every node out of maintenance and every other resource without
	# evaluating it.
	input.nodeguard.nodeLabels[maintenance_window_label] == "true"
	input.spec.resourceAttributes.resource == "configmaps"
	node_name := input.nodeguard.node
	node_name != ""
	attrs := input.spec.resourceAttributes
	object.get(attrs, "group", "") == ""
	object.get(attrs, "subresource", "") == ""
	attrs.verb in {"get", "list", "watch"}
	node := nodeguard.node(node_name)
	target := sprintf("%s/%s", [object.get(attrs, "namespace", ""), object.get(attrs, "name", "")])
	node.assignment == target
	msg := sprintf(
		"node %s is in a maintenance window (label %s) and may not read its kubelet configuration %s",
		[node_name, maintenance_window_label, target],
	)
}
