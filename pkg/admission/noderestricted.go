package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
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

// The resources the rules judge, by the file their rules are in.
var (
	nodesResource      = schema.GroupResource{Resource: "nodes"}
	configMapsResource = schema.GroupResource{Resource: "configmaps"}
	// rolloutsResource is the KubeletConfigRollout's (rollouts.go).
	rolloutsResource = schema.GroupResource{Group: v1alpha1.GroupName, Resource: "kubeletconfigrollouts"}

	// NodeRestriction's, beside Nodes.
	podsResource                   = schema.GroupResource{Resource: "pods"}
	pvcsResource                   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	serviceAccountsResource        = schema.GroupResource{Resource: "serviceaccounts"}
	leasesResource                 = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodesResource               = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
	resourceSlicesResource         = schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}
	csrsResource                   = schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	podCertificateRequestsResource = schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}
)

// nodeRestrictedResources are the resources beside Nodes whose node writes
// Admit judges by NodeRestriction's rules.
var nodeRestrictedResources = sets.New(podsResource, pvcsResource, serviceAccountsResource, leasesResource, csiNodesResource,
	resourceSlicesResource, csrsResource, podCertificateRequestsResource)

// objectName is the name a write is about: on CREATE the object's own,
// since the request may carry none.
func objectName(req *Request, objectMetaName string) string {
	if req.Operation == admissionv1.Create {
		return objectMetaName
	}
	return req.Name
}
