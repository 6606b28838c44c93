package admission

import (
	"context"

	"github.com/nodeguard/nodeguard/pkg/contract"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The rules of the in-tree NodeRestriction admission plugin (v1.37) for the
// resources beside Nodes, which nodeguard enforces for nodes where that
// plugin is off: the standalone manifests (manifests/components/standalone)
// send every such write of a node here, and nobody else's. Each resource's
// rule is in the file named after it. Where NodeRestriction runs, the
// apiserver has already applied them and these writes never reach the
// webhook.
const (
	RuleNodeLeases            contract.Rule = "node leases (NodeRestriction's lease rule)"
	RuleNodeCSINodes          contract.Rule = "node CSINodes (NodeRestriction's CSINode rule)"
	RuleNodeCSRs              contract.Rule = "node CSRs (NodeRestriction's certificate signing request rule)"
	RuleNodeResourceSlices    contract.Rule = "node ResourceSlices (NodeRestriction's ResourceSlice rule)"
	RuleNodeTokens            contract.Rule = "node tokens (NodeRestriction's service account token rule)"
	RuleNodePVCs              contract.Rule = "node PVCs (NodeRestriction's PersistentVolumeClaim rule)"
	RuleNodePodCertificates   contract.Rule = "node pod certificates (NodeRestriction's PodCertificateRequest rule)"
	RuleNodeUnidentifiedWrite contract.Rule = "node without a name"
)

// The resources NodeRestriction confines beside Nodes.
var (
	podsResource                   = schema.GroupResource{Resource: "pods"}
	pvcsResource                   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	serviceAccountsResource        = schema.GroupResource{Resource: "serviceaccounts"}
	leasesResource                 = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodesResource               = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
	resourceSlicesResource         = schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}
	csrsResource                   = schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	podCertificateRequestsResource = schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}
)

// admitNodeRestricted judges a node's write to one of the resources above;
// ok is false for any other resource. Like NodeRestriction it judges
// CREATE, UPDATE and DELETE only, and refuses every such write of a
// system:nodes member whose name does not parse to a node.
func (a *Admitter) admitNodeRestricted(ctx context.Context, req *admissionv1.AdmissionRequest, nodeName string) (r Result, ok bool) {
	resource := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	switch resource {
	case podsResource, pvcsResource, serviceAccountsResource, leasesResource, csiNodesResource,
		resourceSlicesResource, csrsResource, podCertificateRequestsResource:
	default:
		return Result{}, false
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
	default:
		return allow(), true
	}
	if nodeName == "" {
		return refuse(RuleNodeUnidentifiedWrite, "user %q is in group system:nodes but does not name a node, so it may not write %s",
			req.UserInfo.Username, resource), true
	}
	switch resource {
	case podsResource:
		return a.admitPod(ctx, req, nodeName), true
	case pvcsResource:
		return admitPVC(req, nodeName), true
	case serviceAccountsResource:
		return a.admitServiceAccountToken(ctx, req, nodeName), true
	case leasesResource:
		return admitLease(req, nodeName), true
	case csiNodesResource:
		return admitCSINode(req, nodeName), true
	case resourceSlicesResource:
		return admitResourceSlice(req, nodeName), true
	case csrsResource:
		return admitCSR(req, nodeName), true
	default:
		return a.admitPodCertificateRequest(ctx, req, nodeName), true
	}
}

// objectName is the name a write is about: on CREATE the object's own,
// since the request may carry none.
func objectName(req *admissionv1.AdmissionRequest, objectMetaName string) string {
	if req.Operation == admissionv1.Create {
		return objectMetaName
	}
	return req.Name
}
