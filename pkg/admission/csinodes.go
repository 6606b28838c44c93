package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// admitCSINode is NodeRestriction's CSINode rule: a node writes only the
// CSINode named after it, which tells the scheduler and the attach
// controller which CSI drivers run there and how many volumes each takes;
// another node's would misplace pods and volumes. The status subresource
// exists for the alpha CSIVolumeHealth feature, off by default, where
// NodeRestriction refuses every node write to it; nodeguard does the same
// whatever the apiserver's gates (docs/security.md).
func admitCSINode(req *Request, nodeName string) Result {
	name := req.Name
	if req.Operation == admissionv1.Create {
		csiNode, err := required[storagev1.CSINode](req.Obj, "object")
		if err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		name = csiNode.Name
	}
	if name != nodeName {
		return refuse(RuleNodeCSINodes, "node %q may not write CSINode %q: a node writes only the CSINode named after it", nodeName, name)
	}
	if req.SubResource == "status" {
		return refuse(RuleNodeCSINodes, "node %q may not write csinodes/status: it belongs to the CSIVolumeHealth feature, which NodeRestriction leaves off by default", nodeName)
	}
	return allow()
}
