package nodeguard.pool_naming_test

import data.nodeguard.testlib

source_annotation := "nodeguard.dev/config-source"

pool_label := "nodeguard.dev/pool"

denials(labels, annotations, old) := found if {
	found := testlib.admission_denials("pool_naming") with input as testlib.node_review("UPDATE", "node-1", labels, annotations, old)
}

test_config_carrying_the_pool_is_allowed if {
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-gpu"}, {})) == 0
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/gpu"}, {})) == 0
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/gpu-v2"}, {})) == 0
	count(denials({pool_label: "gpu-a100"}, {source_annotation: "kube-system/kubelet-gpu-a100-v3"}, {})) == 0
}

test_config_for_another_pool_is_denied if {
	some m in denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-cpu"}, {})
	contains(m.msg, "Node node-1")
	contains(m.msg, `pool "gpu"`)
	contains(m.msg, "kube-system/kubelet-cpu")
}

test_denial_is_node_scoped if {
	some m in denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-cpu"}, {})
	m.scope == "node"
}

test_pool_must_be_a_whole_part_of_the_name if {
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-nogpu"}, {})) == 1
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-gpus"}, {})) == 1
}

test_case_dots_and_underscores_do_not_matter if {
	count(denials({pool_label: "GPU_A100"}, {source_annotation: "kube-system/kubelet-gpu-a100"}, {})) == 0
	count(denials({pool_label: "gpu.a100"}, {source_annotation: "kube-system/kubelet.gpu.a100"}, {})) == 0
}

test_node_outside_pools_is_not_constrained if {
	count(denials({}, {source_annotation: "kube-system/kubelet-cpu"}, {})) == 0
	count(denials({pool_label: ""}, {source_annotation: "kube-system/kubelet-cpu"}, {})) == 0
}

test_joining_a_pool_is_judged if {
	old := {"annotations": {source_annotation: "kube-system/kubelet-cpu"}}
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-cpu"}, old)) == 1
}

test_unchanged_node_is_not_judged if {
	old := {"labels": {pool_label: "gpu"}, "annotations": {source_annotation: "kube-system/kubelet-cpu"}}
	count(denials({pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-cpu"}, old)) == 0
}

test_clearing_the_assignment_is_allowed if {
	old := {"labels": {pool_label: "gpu"}, "annotations": {source_annotation: "kube-system/kubelet-cpu"}}
	count(denials({pool_label: "gpu"}, {}, old)) == 0
}

test_node_create_is_judged if {
	count(testlib.admission_denials("pool_naming")) == 1 with input as testlib.node_review("CREATE", "node-1", {pool_label: "gpu"}, {source_annotation: "kube-system/kubelet-cpu"}, null)
}

test_configmap_writes_are_not_judged if {
	count(testlib.admission_denials("pool_naming")) == 0 with input as testlib.configmap_review("CREATE", "kube-system", "kubelet-cpu", testlib.eligible, {}, {}, null)
}

# A legacy spec.configSource is an assignment like the annotation.
test_legacy_assignment_for_another_pool_is_denied if {
	review := testlib.legacy_node_review("UPDATE", "node-1", {pool_label: "gpu"}, "kube-system", "kubelet-cpu", {})
	some m in testlib.admission_denials("pool_naming") with input as review
	contains(m.msg, "kube-system/kubelet-cpu")
	carrying := testlib.legacy_node_review("UPDATE", "node-1", {pool_label: "gpu"}, "kube-system", "kubelet-gpu", {})
	count(testlib.admission_denials("pool_naming")) == 0 with input as carrying
}
