# A Node in a pool (label nodeguard.dev/pool) may be assigned only a kubelet
# configuration whose name carries the pool, so that a configuration meant
# for one pool (say gpu) cannot be rolled out to another by a slip of the
# annotation. "Carries" means the pool is one or more whole dash-separated
# parts of the name: pool gpu matches kubelet-gpu and gpu-v2, not nogpu.
# Case, dots and underscores do not matter (a label value may hold them, a
# ConfigMap name cannot).
#
# Judged from the Node in the review, when its assignment or its pool
# changes; nodes outside pools are not constrained.
#
# The label is the administrator's word: rule 2 forbids a node to add,
# change or remove any nodeguard.dev label on its Node, so a node can neither
# put itself in a pool nor leave one to escape this policy. The denial is
# node-scoped ("scope": "node"): it concerns the Node's own pool, so a
# rollout that meets it skips that Node instead of failing its whole pool.
package nodeguard.admission

import data.nodeguard.lib

pool_naming_label := "nodeguard.dev/pool"

default pool_naming_pool := ""

pool_naming_pool := input.request.object.metadata.labels[pool_naming_label]

default pool_naming_old_pool := ""

pool_naming_old_pool := input.request.oldObject.metadata.labels[pool_naming_label]

deny contains {"rule": "pool_naming", "scope": "node", "msg": msg} if {
	input.request.resource.resource == "nodes"
	lib.node_write
	pool := pool_naming_pool
	pool != ""
	pool_naming_changed
	source := lib.config_source
	ref := lib.parse_config_source(source)
	not pool_naming_carries(ref.name, pool)
	msg := sprintf(
		"Node %s is in pool %q (label %s) but is assigned kubelet configuration %s, whose name does not carry the pool",
		[lib.object_name, pool, pool_naming_label, source],
	)
}

pool_naming_changed if lib.assignment_changed

pool_naming_changed if pool_naming_pool != pool_naming_old_pool

pool_naming_carries(name, pool) if {
	contains(
		concat("", ["-", pool_naming_normalize(name), "-"]),
		concat("", ["-", pool_naming_normalize(pool), "-"]),
	)
}

pool_naming_normalize(s) := replace(replace(lower(s), ".", "-"), "_", "-")
