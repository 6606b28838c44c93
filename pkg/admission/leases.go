package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// nodeLeaseNamespace holds the Leases kubelets renew as their heartbeat.
const nodeLeaseNamespace = "kube-node-lease"

// admitLease is NodeRestriction's Lease rule: a node writes only its own
// heartbeat, the Lease named after it in kube-node-lease. A node that
// renewed another's would keep that node looking alive to the node
// lifecycle controller after it died, so that its pods are never evicted
// and rescheduled.
func admitLease(req *Request, nodeName string) Result {
	if req.Namespace != nodeLeaseNamespace {
		return refuse(RuleNodeLeases, "node %q may write Leases only in namespace %s, not %q", nodeName, nodeLeaseNamespace, req.Namespace)
	}
	name := req.Name
	if req.Operation == admissionv1.Create {
		lease, err := required[coordinationv1.Lease](req.Obj, "object")
		if err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		name = lease.Name
	}
	if name != nodeName {
		return refuse(RuleNodeLeases, "node %q may not write Lease %s/%s: a node writes only the Lease named after it", nodeName, nodeLeaseNamespace, name)
	}
	return allow()
}
