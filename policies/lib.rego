# Helpers shared by nodeguard's shipped policies. The names come from
# docs/reference.md: a ConfigMap is a kubelet configuration when it carries the
# eligibility label, and a Node's assignment is its config-source annotation.
#
# The helpers read the review through references, never by passing a whole
# object to a function: the engine converts the objects in a review only as
# far as policies read them, and a function argument is read in full.
package nodeguard.lib

eligible_label := "nodeguard.dev/kubelet-config"

# configmap_write is true for a CREATE or UPDATE of a ConfigMap.
configmap_write if {
	input.request.resource.group == ""
	input.request.resource.resource == "configmaps"
	input.request.operation in {"CREATE", "UPDATE"}
}

# node_write is true for a CREATE or UPDATE of a Node, through any subresource.
node_write if {
	input.request.resource.group == ""
	input.request.resource.resource == "nodes"
	input.request.operation in {"CREATE", "UPDATE"}
}

# object_eligible is true when the object under review carries the
# eligibility label.
object_eligible if input.request.object.metadata.labels[eligible_label] == "true"

# object_name is the name of the object under review; on CREATE it comes
# from the object, since request.name may be empty there.
object_name := name if {
	name := input.request.object.metadata.name
	name != ""
} else := input.request.name

# object_annotation(key) is the annotation's value on the object under
# review, "" when it has none.
object_annotation(key) := value if {
	value := input.request.object.metadata.annotations[key]
} else := ""

# config_source and old_config_source are the assignment of the Node under
# review, before and after, as "<namespace>/<name>"; "" for none (or no old
# object, on CREATE). As docs/reference.md reads an assignment (and the agent and
# the graph with it): the annotation wins, even empty; a Node without it
# that still carries a legacy spec.configSource.configMap is assigned that
# ConfigMap, and judged exactly as if the annotation named it. Node writes
# are the most frequent reviews, hence plain rules with defaults, which
# evaluate faster than function calls.
default config_source := ""

config_source := value if {
	value := input.request.object.metadata.annotations["nodeguard.dev/config-source"]
} else := value if {
	value := legacy_config_source(input.request.object.spec.configSource.configMap)
}

default old_config_source := ""

old_config_source := value if {
	value := input.request.oldObject.metadata.annotations["nodeguard.dev/config-source"]
} else := value if {
	value := legacy_config_source(input.request.oldObject.spec.configSource.configMap)
}

# legacy_config_source(ref) is a legacy spec.configSource.configMap as the
# annotation would name it; undefined without a namespace and a name (the
# agent then assigns nothing).
legacy_config_source(ref) := sprintf("%s/%s", [ref.namespace, ref.name]) if {
	ref.namespace != ""
	ref.name != ""
}

# assignment_changed is true when a Node write sets, changes or clears the
# assignment. Policies judge only changes, so that a kubelet updating its
# own Node is never refused for an assignment made earlier.
assignment_changed if config_source != old_config_source

# parse_config_source(value) is {"namespace", "name"} for "<namespace>/<name>",
# undefined for anything else (the built-in rules refuse malformed values).
parse_config_source(value) := {"namespace": parts[0], "name": parts[1]} if {
	parts := split(value, "/")
	count(parts) == 2
	parts[0] != ""
	parts[1] != ""
}
