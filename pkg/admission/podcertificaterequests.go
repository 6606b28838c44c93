package admission

import (
	"context"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// podCertificateSignerVerb is the verb RBAC grants a node to request pod
// certificates from a signer its pods do not name.
const podCertificateSignerVerb = "request-serviceaccounts-podcertificate-signer"

// admitPodCertificateRequest is NodeRestriction's PodCertificateRequest
// rule (GA in 1.37): a node asks for a certificate only for a pod that runs
// on it, naming that pod, its service account and itself by name and UID,
// never for a mirror pod, and only from a signer the pod's volumes name or
// RBAC grants it. Otherwise a node could get certificates in the name of
// any service account of any namespace.
func (a *Admitter) admitPodCertificateRequest(ctx context.Context, req *Request, nodeName string) Result {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return refuse(RuleNodePodCertificates, "node %q may only create podcertificaterequests", nodeName)
	}
	pcr, err := required[certificatesv1.PodCertificateRequest](req.Obj, "object")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	spec := pcr.Spec
	podRef := req.Namespace + "/" + spec.PodName
	if string(spec.NodeName) != nodeName {
		return refuse(RuleNodePodCertificates, "node %q may not request a pod certificate in the name of node %q", nodeName, spec.NodeName)
	}
	node, err := a.cluster.Node(ctx, nodeName)
	if err != nil {
		return refuse(RuleNodePodCertificates, "cannot check node %q: %v", nodeName, err)
	}
	if node.UID != spec.NodeUID {
		return refuse(RuleNodePodCertificates, "the request names node UID %q, but node %q has UID %q", spec.NodeUID, nodeName, node.UID)
	}
	pod, err := a.cluster.Pod(ctx, req.Namespace, spec.PodName)
	if err != nil {
		return refuse(RuleNodePodCertificates, "cannot check pod %s: %v", podRef, err)
	}
	switch {
	case pod.UID != spec.PodUID:
		return refuse(RuleNodePodCertificates, "the request names pod UID %q, but pod %s has UID %q", spec.PodUID, podRef, pod.UID)
	case pod.Spec.NodeName != nodeName:
		return refuse(RuleNodePodCertificates, "pod %s runs on %q, not on node %q", podRef, pod.Spec.NodeName, nodeName)
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return refuse(RuleNodePodCertificates, "pod %s is a mirror pod, which gets no pod certificates", podRef)
	}
	if spec.ServiceAccountName != pod.Spec.ServiceAccountName {
		return refuse(RuleNodePodCertificates, "the request names service account %q, but pod %s runs as %q", spec.ServiceAccountName, podRef, pod.Spec.ServiceAccountName)
	}
	sa, err := a.cluster.ServiceAccount(ctx, req.Namespace, spec.ServiceAccountName)
	if err != nil {
		return refuse(RuleNodePodCertificates, "cannot check service account %s/%s: %v", req.Namespace, spec.ServiceAccountName, err)
	}
	if sa.UID != spec.ServiceAccountUID {
		return refuse(RuleNodePodCertificates, "the request names service account UID %q, but %s/%s has UID %q", spec.ServiceAccountUID, req.Namespace, sa.Name, sa.UID)
	}
	if podNamesSigner(pod, spec.SignerName) {
		return allow()
	}
	// RBAC cannot hold a slash in a resource name: signers are named
	// with colons there, as for ClusterTrustBundles.
	allowed, err := a.cluster.Authorize(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Namespace: req.Namespace, Verb: podCertificateSignerVerb,
		Group: req.Resource.Group, Version: req.Resource.Version,
		Resource: strings.ReplaceAll(spec.SignerName, "/", ":"), Name: spec.ServiceAccountName,
	})
	switch {
	case allowed:
		return allow()
	case err != nil:
		return refuse(RuleNodePodCertificates, "cannot check whether node %q may use signer %s: %v", nodeName, spec.SignerName, err)
	}
	return refuse(RuleNodePodCertificates, "pod %s mounts no pod certificate from signer %s, and RBAC does not let node %q %s it",
		podRef, spec.SignerName, nodeName, podCertificateSignerVerb)
}

func podNamesSigner(pod *corev1.Pod, signer string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, source := range v.Projected.Sources {
			if source.PodCertificate != nil && source.PodCertificate.SignerName == signer {
				return true
			}
		}
	}
	return false
}
