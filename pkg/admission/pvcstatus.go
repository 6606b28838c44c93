package admission

import (
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// admitPVC is NodeRestriction's PersistentVolumeClaim rule: a node writes
// claims only through their status, and there only the capacity, the
// conditions and what a volume expansion records. Everything else (labels,
// finalizers, owners, the rest of the status) is the control plane's: a
// node that could relabel or finalize claims could steer or pin other
// workloads' storage.
func admitPVC(req *Request, nodeName string) Result {
	if req.SubResource != "status" {
		return refuse(RuleNodePVCs, "node %q may not %s persistentvolumeclaims%s: a node may only update a claim's status",
			nodeName, strings.ToLower(string(req.Operation)), subresourceSuffix(req.SubResource))
	}
	if req.Operation != admissionv1.Update {
		return refuse(RuleNodePVCs, "node %q may not %s persistentvolumeclaims/status", nodeName, strings.ToLower(string(req.Operation)))
	}
	old, err := required[corev1.PersistentVolumeClaim](req.OldObj, "oldObject")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	claim, err := required[corev1.PersistentVolumeClaim](req.Obj, "object")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	if !apiequality.Semantic.DeepEqual(withoutNodeWritableStatus(old), withoutNodeWritableStatus(claim)) {
		return refuse(RuleNodePVCs, "node %q may only change status.capacity, status.conditions, status.allocatedResources and status.allocatedResourceStatuses of claim %s/%s",
			nodeName, req.Namespace, req.Name)
	}
	return allow()
}

// withoutNodeWritableStatus is the claim without what a node may write, nor
// the resourceVersion (an unconditional update leaves it empty) and the
// managed fields (the apiserver's bookkeeping of who wrote what). The
// allocated resources are the node's to write since volume expansion
// recovery went GA (RecoverVolumeExpansionFailure, locked on in 1.34).
func withoutNodeWritableStatus(claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	c := claim.DeepCopy()
	c.ResourceVersion = ""
	c.ManagedFields = nil
	c.Status.Capacity = nil
	c.Status.Conditions = nil
	c.Status.AllocatedResources = nil
	c.Status.AllocatedResourceStatuses = nil
	return c
}

func subresourceSuffix(subresource string) string {
	if subresource == "" {
		return ""
	}
	return "/" + subresource
}
