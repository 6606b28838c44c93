package admission

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeguard/nodeguard/pkg/contract"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
)

// RuleNodePods names the pod rules of the in-tree NodeRestriction plugin,
// which nodeguard enforces for nodes where that plugin is off (the
// standalone manifests): without them a node could create a pod bound to
// itself that references any ConfigMap, and the graph, which trusts pods
// bound to a node, would then let it read that ConfigMap.
const RuleNodePods contract.Rule = "node pods (NodeRestriction's pod rules)"

// mirrorPodAnnotation marks a mirror pod: the API copy of a kubelet's
// static pod, the only kind of pod a node may create.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// admitPod judges a node's write of a pod, as NodeRestriction does: a node
// creates only mirror pods bound to itself, owned by its own Node, that
// reference no other API object; deletes and evicts only pods bound to
// itself; updates only the status of those, never their labels nor their
// resource claims; and writes no other subresource.
func (a *Admitter) admitPod(ctx context.Context, req *Request, nodeName string) Result {
	switch req.SubResource {
	case "":
		switch req.Operation {
		case admissionv1.Create:
			pod, err := required[corev1.Pod](req.Obj, "object")
			if err != nil {
				return refuse(RuleMalformed, "%v", err)
			}
			return a.admitMirrorPod(ctx, nodeName, pod)
		case admissionv1.Delete:
			// The pod as stored says where it is bound (NodeRestriction
			// reads it from its informer).
			old, err := required[corev1.Pod](req.OldObj, "oldObject")
			if err != nil {
				return refuse(RuleMalformed, "%v", err)
			}
			if old.Spec.NodeName != nodeName {
				return refuse(RuleNodePods, "node %q may not delete pod %s/%s: it is bound to %q, and a node deletes only its own pods",
					nodeName, req.Namespace, req.Name, old.Spec.NodeName)
			}
			return allow()
		default:
			return refuse(RuleNodePods, "node %q may not %s pods: a node only creates and deletes mirror pods and updates the status of its own",
				nodeName, strings.ToLower(string(req.Operation)))
		}
	case "status":
		if req.Operation != admissionv1.Update {
			return refuse(RuleNodePods, "node %q may not %s pods/status", nodeName, strings.ToLower(string(req.Operation)))
		}
		return admitPodStatus(req, nodeName)
	case "eviction":
		if req.Operation != admissionv1.Create {
			return refuse(RuleNodePods, "node %q may not %s pods/eviction", nodeName, strings.ToLower(string(req.Operation)))
		}
		return a.admitPodEviction(ctx, req, nodeName)
	default:
		return refuse(RuleNodePods, "node %q may not write pods/%s: a node writes only pods, pods/status and pods/eviction", nodeName, req.SubResource)
	}
}

// admitMirrorPod is the creation rule. Ownership matters as much as
// binding: the garbage collector deletes a mirror pod with its Node only
// when the Node is its controller, and a node that could name another
// owner (or none) could leave pods behind that outlive it, or have the
// collector delete them on another object's account.
func (a *Admitter) admitMirrorPod(ctx context.Context, nodeName string, pod *corev1.Pod) Result {
	if _, ok := pod.Annotations[mirrorPodAnnotation]; !ok {
		return refuse(RuleNodePods, "node %q may only create mirror pods (annotated %s)", nodeName, mirrorPodAnnotation)
	}
	if pod.Spec.NodeName != nodeName {
		return refuse(RuleNodePods, "node %q may not create a pod bound to %q", nodeName, pod.Spec.NodeName)
	}
	if len(pod.OwnerReferences) != 1 {
		return refuse(RuleNodePods, "node %q may only create a pod with exactly one owner reference, its own Node as controller; this one has %d",
			nodeName, len(pod.OwnerReferences))
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != nodeName {
		return refuse(RuleNodePods, "node %q may not create a pod owned by %s %s %s: a mirror pod is owned by its Node only",
			nodeName, owner.APIVersion, owner.Kind, owner.Name)
	}
	if owner.Controller == nil || !*owner.Controller {
		return refuse(RuleNodePods, "node %q may only create a pod whose owner reference to its Node is its controller", nodeName)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return refuse(RuleNodePods, "node %q may not set blockOwnerDeletion on a pod's owner reference", nodeName)
	}
	node, err := a.cluster.Node(ctx, nodeName)
	if err != nil {
		return refuse(RuleNodePods, "cannot check the UID of node %q that owns the pod: %v", nodeName, err)
	}
	if owner.UID != node.UID {
		return refuse(RuleNodePods, "node %q may not create a pod owned by a Node with UID %q: its own Node's UID is %q",
			nodeName, owner.UID, node.UID)
	}
	if refs, err := podAPIReferences(pod); err != nil || len(refs) > 0 {
		if err != nil {
			return refuse(RuleNodePods, "node %q may not create pod %s/%s: %v", nodeName, pod.Namespace, pod.Name, err)
		}
		return refuse(RuleNodePods, "node %q may not create a pod that references %s: it could then read them through the graph",
			nodeName, strings.Join(refs, ", "))
	}
	return allow()
}

// admitPodStatus is the status rule: the pod must be bound to the node, and
// a status write may not change what others select the pod by (its labels:
// a node relabelling its pod could join another Service's endpoints or
// another NetworkPolicy's selection) nor the resource claims it was given.
func admitPodStatus(req *Request, nodeName string) Result {
	old, err := required[corev1.Pod](req.OldObj, "oldObject")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	if old.Spec.NodeName != nodeName {
		return refuse(RuleNodePods, "node %q may not update the status of pod %s/%s: it is bound to %q, and a node writes only its own pods",
			nodeName, req.Namespace, req.Name, old.Spec.NodeName)
	}
	pod, err := required[corev1.Pod](req.Obj, "object")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	if pod.Spec.NodeName != nodeName {
		return refuse(RuleNodePods, "node %q may not bind pod %s/%s to %q", nodeName, req.Namespace, req.Name, pod.Spec.NodeName)
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return refuse(RuleNodePods, "node %q may not change the labels of pod %s/%s through its status", nodeName, req.Namespace, req.Name)
	}
	for _, claims := range []struct {
		what     string
		old, new any
	}{
		{"resourceClaimStatuses", old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses},
		{"extendedResourceClaimStatus", old.Status.ExtendedResourceClaimStatus, pod.Status.ExtendedResourceClaimStatus},
		{"nodeAllocatableResourceClaimStatuses", old.Status.NodeAllocatableResourceClaimStatuses, pod.Status.NodeAllocatableResourceClaimStatuses},
	} {
		if !apiequality.Semantic.DeepEqual(claims.old, claims.new) {
			return refuse(RuleNodePods, "node %q may not change status.%s of pod %s/%s: the resource claim controller writes them",
				nodeName, claims.what, req.Namespace, req.Name)
		}
	}
	return allow()
}

// admitPodEviction lets a node evict only pods bound to itself. The review
// carries the Eviction, not the pod: the pod is looked up.
func (a *Admitter) admitPodEviction(ctx context.Context, req *Request, nodeName string) Result {
	eviction, err := required[policyv1.Eviction](req.Obj, "object")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	// The name in the request wins over the Eviction's, as the apiserver
	// evicts the pod the URL names.
	podName := req.Name
	if podName == "" {
		podName = eviction.Name
	}
	if podName == "" {
		return refuse(RuleNodePods, "node %q may not evict a pod the request does not name", nodeName)
	}
	pod, err := a.cluster.Pod(ctx, req.Namespace, podName)
	if err != nil {
		return refuse(RuleNodePods, "cannot check where pod %s/%s is bound: %v", req.Namespace, podName, err)
	}
	if pod.Spec.NodeName != nodeName {
		return refuse(RuleNodePods, "node %q may not evict pod %s/%s: it is bound to %q, and a node evicts only its own pods",
			nodeName, req.Namespace, podName, pod.Spec.NodeName)
	}
	return allow()
}

// podAPIReferences lists the API objects a pod names (NodeRestriction's
// podutil.HasAPIObjectReference): any of them would entitle the pod's node
// to read it, through the Node authorizer's graph and nodeguard's alike.
// ConfigMaps are found as the graph finds them (contract.VisitPodConfigMaps).
// A volume of a type this build does not know is an error, refused too.
func podAPIReferences(pod *corev1.Pod) ([]string, error) {
	var refs []string
	add := func(kind, name string) {
		if name != "" {
			refs = append(refs, fmt.Sprintf("%s %q", kind, name))
		}
	}
	add("service account", pod.Spec.ServiceAccountName)
	add("service account", pod.Spec.DeprecatedServiceAccount) //nolint:staticcheck // still read by the apiserver's defaulting
	for _, s := range pod.Spec.ImagePullSecrets {
		add("secret", s.Name)
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
		}
		for _, env := range c.Env {
			if env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil {
				add("secret", env.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	contract.VisitPodConfigMaps(pod, func(use contract.PodConfigMapUse) bool {
		// A ConfigMap volume reads the API whatever it names: it is
		// listed even when the name is empty.
		if use.Volume != "" {
			refs = append(refs, fmt.Sprintf("configmap %q", use.Name))
		} else {
			add("configmap", use.Name)
		}
		return true
	})
	for _, claim := range pod.Spec.ResourceClaims {
		refs = append(refs, fmt.Sprintf("resourceclaim %q", claim.Name))
	}
	for _, v := range pod.Spec.Volumes {
		volumeRefs, err := volumeAPIReferences(v)
		if err != nil {
			return nil, err
		}
		refs = append(refs, volumeRefs...)
	}
	return refs, nil
}

// volumeAPIReferences lists what one volume names: the secrets of the
// volume types that take one, and every source that reads the API but
// ConfigMaps, which podAPIReferences lists.
func volumeAPIReferences(v corev1.Volume) ([]string, error) {
	ref := func(kind, name string) []string { return []string{fmt.Sprintf("%s %q", kind, name)} }
	secretRef := func(r *corev1.LocalObjectReference) []string {
		if r == nil || r.Name == "" {
			return nil
		}
		return ref("secret", r.Name)
	}
	s := v.VolumeSource
	switch {
	case s.CephFS != nil:
		return secretRef(s.CephFS.SecretRef), nil
	case s.Cinder != nil:
		return secretRef(s.Cinder.SecretRef), nil
	case s.FlexVolume != nil:
		return secretRef(s.FlexVolume.SecretRef), nil
	case s.RBD != nil:
		return secretRef(s.RBD.SecretRef), nil
	case s.ISCSI != nil:
		return secretRef(s.ISCSI.SecretRef), nil
	case s.ScaleIO != nil:
		return secretRef(s.ScaleIO.SecretRef), nil
	case s.StorageOS != nil:
		if s.StorageOS.SecretRef != nil && s.StorageOS.SecretRef.Name != "" {
			return ref("secret", s.StorageOS.SecretRef.Name), nil
		}
		return nil, nil
	case s.AWSElasticBlockStore != nil, s.AzureDisk != nil, s.DownwardAPI != nil, s.EmptyDir != nil, s.FC != nil,
		s.Flocker != nil, s.GCEPersistentDisk != nil, s.GitRepo != nil, s.HostPath != nil, s.Image != nil, s.NFS != nil,
		s.PhotonPersistentDisk != nil, s.PortworxVolume != nil, s.Quobyte != nil, s.VsphereVolume != nil:
		return nil, nil
	case s.ConfigMap != nil:
		// Listed by podAPIReferences, with the other ConfigMaps.
		return nil, nil
	case s.Secret != nil:
		return ref("secret", s.Secret.SecretName), nil
	case s.CSI != nil:
		return ref("csidriver", s.CSI.Driver), nil
	case s.Glusterfs != nil:
		return ref("endpoints", s.Glusterfs.EndpointsName), nil
	case s.PersistentVolumeClaim != nil:
		return ref("persistentvolumeclaim", s.PersistentVolumeClaim.ClaimName), nil
	case s.Ephemeral != nil:
		return ref("ephemeral volume", v.Name), nil
	case s.AzureFile != nil:
		return ref("secret", s.AzureFile.SecretName), nil
	case s.Projected != nil:
		var refs []string
		for _, source := range s.Projected.Sources {
			switch {
			case source.ConfigMap != nil:
				// Listed by podAPIReferences, with the other ConfigMaps.
			case source.Secret != nil:
				refs = append(refs, ref("secret", source.Secret.Name)...)
			case source.ServiceAccountToken != nil:
				refs = append(refs, ref("service account token", v.Name)...)
			case source.ClusterTrustBundle != nil:
				refs = append(refs, ref("clustertrustbundle", v.Name)...)
			case source.PodCertificate != nil:
				refs = append(refs, ref("pod certificate", v.Name)...)
			case source.DownwardAPI != nil:
			default:
				return nil, fmt.Errorf("projected volume %q has a source this webhook does not know", v.Name)
			}
		}
		return refs, nil
	default:
		return nil, fmt.Errorf("volume %q is of a type this webhook does not know", v.Name)
	}
}
