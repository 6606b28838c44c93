package admission

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// RuleNodePods names the pod rules of the in-tree NodeRestriction plugin,
// which nodeguard enforces for nodes where that plugin is off (the
// standalone manifests): without them a node could create a pod bound to
// itself that references any ConfigMap, and the graph, which trusts pods
// bound to a node, would then let it read that ConfigMap.
const RuleNodePods Rule = "node pods (NodeRestriction's pod rules)"

// mirrorPodAnnotation marks a mirror pod: the API copy of a kubelet's
// static pod, the only kind of pod a node may create.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// admitPod judges a node's write of a pod, as NodeRestriction does: a node
// creates only mirror pods bound to itself that reference nothing it could
// not read anyway, updates only the status of pods bound to itself, and
// deletes or evicts only those. Other users' pod writes are not nodeguard's
// to judge.
func admitPod(req *admissionv1.AdmissionRequest, nodeName string) Result {
	if nodeName == "" {
		return refuse(RuleNodePods, "user %q is in group system:nodes but does not name a node, so it may not write pods", req.UserInfo.Username)
	}
	switch {
	case req.SubResource == "" && req.Operation == admissionv1.Create:
		pod, err := decodePod(req.Object, "object")
		if err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		return admitMirrorPod(nodeName, pod)
	case req.SubResource == "" && req.Operation == admissionv1.Delete,
		req.SubResource == "status" && req.Operation == admissionv1.Update:
		// The pod as stored says where it is bound; a status update may
		// not move it either.
		old, err := decodePod(req.OldObject, "oldObject")
		if err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		if old.Spec.NodeName != nodeName {
			return refuse(RuleNodePods, "node %q may not %s pod %s/%s: it is bound to %q, and a node writes only its own pods",
				nodeName, strings.ToLower(string(req.Operation)), req.Namespace, req.Name, old.Spec.NodeName)
		}
		if req.Operation == admissionv1.Update {
			pod, err := decodePod(req.Object, "object")
			if err != nil {
				return refuse(RuleMalformed, "%v", err)
			}
			if pod.Spec.NodeName != nodeName {
				return refuse(RuleNodePods, "node %q may not bind pod %s/%s to %q", nodeName, req.Namespace, req.Name, pod.Spec.NodeName)
			}
		}
		return allow()
	case req.SubResource == "":
		return refuse(RuleNodePods, "node %q may not %s pods: a node only creates and deletes mirror pods and updates the status of its own",
			nodeName, strings.ToLower(string(req.Operation)))
	default:
		// Evictions name a pod the review does not carry; NodeRestriction
		// looks it up. Without a pod informer here, refuse: a kubelet
		// evicts through its own eviction manager, not this API.
		return refuse(RuleNodePods, "node %q may not write pods/%s where NodeRestriction is off", nodeName, req.SubResource)
	}
}

// admitMirrorPod is the creation rule.
func admitMirrorPod(nodeName string, pod *corev1.Pod) Result {
	if _, ok := pod.Annotations[mirrorPodAnnotation]; !ok {
		return refuse(RuleNodePods, "node %q may only create mirror pods (annotated %s)", nodeName, mirrorPodAnnotation)
	}
	if pod.Spec.NodeName != nodeName {
		return refuse(RuleNodePods, "node %q may not create a pod bound to %q", nodeName, pod.Spec.NodeName)
	}
	for _, ref := range pod.OwnerReferences {
		if ref.APIVersion != "v1" || ref.Kind != "Node" || ref.Name != nodeName {
			return refuse(RuleNodePods, "node %q may not create a pod owned by %s %s: a mirror pod is owned by its Node only", nodeName, ref.Kind, ref.Name)
		}
	}
	if pod.Spec.ServiceAccountName != "" {
		return refuse(RuleNodePods, "node %q may not create a pod that uses service account %q", nodeName, pod.Spec.ServiceAccountName)
	}
	if refs := podReferences(pod); len(refs) > 0 {
		return refuse(RuleNodePods, "node %q may not create a pod that references %s: it could then read them through the graph",
			nodeName, strings.Join(refs, ", "))
	}
	return allow()
}

// podReferences lists the objects a pod would entitle its node to read,
// the way the Node authorizer's graph follows them.
func podReferences(pod *corev1.Pod) []string {
	var refs []string
	add := func(kind, name string) { refs = append(refs, fmt.Sprintf("%s %q", kind, name)) }
	for _, s := range pod.Spec.ImagePullSecrets {
		add("secret", s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add("secret", v.Secret.SecretName)
		case v.ConfigMap != nil:
			add("configmap", v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			add("persistentvolumeclaim", v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add("ephemeral volume", v.Name)
		case v.Projected != nil:
			for _, source := range v.Projected.Sources {
				switch {
				case source.Secret != nil:
					add("secret", source.Secret.Name)
				case source.ConfigMap != nil:
					add("configmap", source.ConfigMap.Name)
				case source.ServiceAccountToken != nil:
					add("service account token", v.Name)
				case source.ClusterTrustBundle != nil:
					add("clustertrustbundle", v.Name)
				}
			}
		}
	}
	containers := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range pod.Spec.EphemeralContainers {
		containers = append(containers, corev1.Container(c.EphemeralContainerCommon))
	}
	for _, c := range containers {
		for _, from := range c.EnvFrom {
			if from.SecretRef != nil {
				add("secret", from.SecretRef.Name)
			}
			if from.ConfigMapRef != nil {
				add("configmap", from.ConfigMapRef.Name)
			}
		}
		for _, env := range c.Env {
			if env.ValueFrom == nil {
				continue
			}
			if env.ValueFrom.SecretKeyRef != nil {
				add("secret", env.ValueFrom.SecretKeyRef.Name)
			}
			if env.ValueFrom.ConfigMapKeyRef != nil {
				add("configmap", env.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for _, claim := range pod.Spec.ResourceClaims {
		add("resourceclaim", claim.Name)
	}
	return refs
}
