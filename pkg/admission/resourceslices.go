package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// admitResourceSlice is NodeRestriction's ResourceSlice rule: a node
// creates and deletes only the slices of its own node (spec.nodeName), in
// which its DRA drivers publish the devices it has. A slice for another
// node would offer the scheduler devices that node does not have, or take
// away those it has. Updates are left to the Node authorizer, which knows
// the stored slice, as NodeRestriction leaves them.
func admitResourceSlice(req *Request, nodeName string) Result {
	which, obj := "object", req.Obj
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Delete:
		which, obj = "oldObject", req.OldObj
	default:
		return allow()
	}
	slice, err := required[resourcev1.ResourceSlice](obj, which)
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	if slice.Spec.NodeName == nil || *slice.Spec.NodeName != nodeName {
		target := "no node"
		if slice.Spec.NodeName != nil {
			target = "node " + *slice.Spec.NodeName
		}
		verb := "create"
		if req.Operation == admissionv1.Delete {
			verb = "delete"
		}
		return refuse(RuleNodeResourceSlices, "node %q may not %s ResourceSlice %q for %s: a node writes only the slices of its own node", nodeName, verb, slice.Name, target)
	}
	return allow()
}
